"""Load against the real server: gunicorn on loopback (as `make run` starts it), on SQLite and
on PostgreSQL. 200 concurrent GETs over the main pages and APIs, and 20 concurrent evidence
uploads (10 distinct statements, 10 copies of one): no 5xx, one record per statement.

Each backend gets its own fresh database (a temporary SQLite file; ``<DATABASE_URL's name>_load``
on the PostgreSQL server of DATABASE_URL), set up with the product's own commands. The figures
(latency percentiles, connections held) are printed; run with ``-s`` to see them.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.client import HTTPResponse
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from tests.shared_data import REPO_ROOT

VENV_BIN = Path(sys.executable).parent
WEB_WORKERS = 2
WEB_THREADS = 16
POOL_MAX_SIZE = 5  # per gunicorn worker
CONCURRENT_GETS = 200
DISTINCT_UPLOADS = 10
IDENTICAL_UPLOADS = 10
START_TIMEOUT_S = 60
REQUEST_TIMEOUT_S = 120

# Signed demo evidence made with the site's own code, inside the site's environment (its
# catalog's recipes and demo keys): distinct statements and one repeated one.
MAKE_BUNDLES = f"""
import base64, json
from datetime import timedelta
from django.utils import timezone
from evidence_app.services import demo
from evidence_app.services.staleness import validator_catalog_version
from recipes_app.models import Catalog
catalog = Catalog.objects.current()
recipes = demo.demo_recipes(catalog)
version = validator_catalog_version(catalog)
now = timezone.now().replace(second=0, microsecond=0)
run = demo.RUNS[0]
distinct = [
    demo.demo_evidence_directory(
        recipes[i % len(recipes)], demo.LABS[0], run,
        attested_at=now - timedelta(hours=1, minutes=i), validator_version=version,
    )
    for i in range({DISTINCT_UPLOADS})
]
same = demo.demo_evidence_directory(
    recipes[0], demo.LABS[1], run, attested_at=now - timedelta(hours=2), validator_version=version
)
print(json.dumps({{
    "distinct": [base64.b64encode(b).decode() for b in distinct],
    "same": base64.b64encode(same).decode(),
}}))
"""


@dataclass
class Site:
    backend: str
    base_url: str
    env: dict[str, str]
    token: str
    database_url: str
    log: Path
    sqlite_path: Path | None
    bundles: dict[str, Any] = field(default_factory=dict)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"manage.py {args[0]} failed:\n{result.stderr[-3000:]}"
    return result.stdout


def _postgres_load_url() -> str:
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        pytest.skip("the PostgreSQL load test needs DATABASE_URL=postgres://… (CI sets it)")
    parts = urlsplit(url)
    name = parts.path.lstrip("/") + "_load"
    admin_url = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit(parts._replace(path=f"/{name}"))


def _drop_postgres(url: str) -> None:
    parts = urlsplit(url)
    admin_url = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{parts.path.lstrip("/")}" WITH (FORCE)')


def _site_env(database_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"REDIS_URL", "CELERY_EMBEDDED_BROKER"}}
    env.update(
        DJANGO_SETTINGS_MODULE="aicr_site.settings",
        DEBUG="1",  # as `make run` serves (seed_demo refuses otherwise)
        DATABASE_URL=database_url,
        DB_POOL_MAX_SIZE=str(POOL_MAX_SIZE),
        LOG_LEVEL="WARNING",
        # The uploads all come from one token: its rate must not be what is measured.
        EVIDENCE_UPLOAD_RATE="10000/min",
        **extra,
    )
    return env


def _start_gunicorn(env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    command = [
        str(VENV_BIN / "gunicorn"),
        "aicr_site.wsgi:application",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        str(WEB_WORKERS),
        "--threads",
        str(WEB_THREADS),
        "--timeout",
        "120",
    ]
    with log.open("ab") as out:
        process = subprocess.Popen(
            command, cwd=REPO_ROOT, env=env, stdout=out, stderr=out, start_new_session=True
        )
    base_url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"gunicorn exited:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{base_url}/api/v1/", timeout=5) as answer:
                if answer.status == 200:
                    return process, base_url
        except (OSError, urllib.error.URLError):
            time.sleep(0.3)
    _stop(process)
    pytest.fail(f"gunicorn did not answer within {START_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def site(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Site]:
    backend = request.param
    tmp = tmp_path_factory.mktemp(f"load-{backend}")
    sqlite_path = tmp / "load.sqlite3" if backend == "sqlite" else None
    database_url = f"sqlite:///{sqlite_path}" if sqlite_path else _postgres_load_url()
    env = _site_env(database_url)
    try:
        _manage(env, "migrate", "--no-input", "-v", "0")
        _manage(env, "import_catalog")
        _manage(env, "seed_demo")
        token = _manage(env, "create_token", "load-tester", "--role", "contributor").strip()
        bundles = json.loads(_manage(env, "shell", "-c", MAKE_BUNDLES).strip().splitlines()[-1])
        log = tmp / "gunicorn.log"
        process, base_url = _start_gunicorn(env, log)
        try:
            yield Site(backend, base_url, env, token, database_url, log, sqlite_path, bundles)
        finally:
            _stop(process)
    finally:
        if backend == "postgresql":
            _drop_postgres(database_url)


# --- HTTP helpers --------------------------------------------------------------------------


@dataclass
class Answer:
    url: str
    status: int  # 0: no HTTP answer at all (connection refused, reset, timed out)
    seconds: float
    body: bytes = b""
    error: str = ""


def _request(
    url: str, *, data: bytes | None = None, headers: dict[str, str] | None = None
) -> Answer:
    started = time.perf_counter()
    req = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=REQUEST_TIMEOUT_S) as response:
            body = response.read()
            return Answer(url, response.status, time.perf_counter() - started, body)
    except urllib.error.HTTPError as exc:
        return Answer(url, exc.code, time.perf_counter() - started, exc.read())
    except OSError as exc:
        return Answer(url, 0, time.perf_counter() - started, error=repr(exc))


def _all_at_once(calls: list[Any]) -> list[Answer]:
    """Run every call on its own thread, released together."""
    barrier = threading.Barrier(len(calls))

    def run(call: Any) -> Answer:
        barrier.wait()
        return call()

    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return list(pool.map(run, calls))


def _report(label: str, answers: list[Answer], wall: float) -> None:
    times = sorted(a.seconds for a in answers)
    p95 = times[int(len(times) * 0.95) - 1]
    print(
        f"\n[load] {label}: {len(answers)} requests in {wall:.2f} s wall; "
        f"latency p50 {statistics.median(times) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, "
        f"max {times[-1] * 1000:.0f} ms; statuses {dict(Counter(a.status for a in answers))}"
    )


def _failures(answers: list[Answer]) -> list[str]:
    return [
        f"{a.status} {a.url} {a.error or a.body[:200]!r}"
        for a in answers
        if a.status == 0 or a.status >= 500
    ]


def _multipart(filename: str, content: bytes) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    body = (
        (
            f"--{boundary}\r\n"
            f'Content-Disposition: form-data; name="bundle"; filename="{filename}"\r\n'
            "Content-Type: application/gzip\r\n\r\n"
        ).encode()
        + content
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return body, f"multipart/form-data; boundary={boundary}"


def _evidence_count(site: Site) -> int:
    answer = _request(f"{site.base_url}/api/v1/evidence/")
    assert answer.status == 200, answer.body[:300]
    return int(json.loads(answer.body)["count"])


# --- the load ------------------------------------------------------------------------------


def test_200_concurrent_gets_are_all_answered(site: Site) -> None:
    listing = json.loads(_request(f"{site.base_url}/api/v1/evidence/").body)["results"]
    recipes = json.loads(_request(f"{site.base_url}/api/v1/recipes/").body)["results"]
    evidence_id = listing[0]["id"]
    recipe_name = recipes[0]["name"]
    paths = [
        "/recipes/",
        f"/recipes/{recipe_name}/",
        "/recipes/?q=h100",
        "/evidence/",
        f"/evidence/{evidence_id}/",
        "/evidence/new/",
        "/accounts/login/",
        "/api/v1/recipes/",
        f"/api/v1/recipes/{recipe_name}/",
        "/api/v1/evidence/",
        f"/api/v1/evidence/{evidence_id}/",
        "/api/v1/signers/",
        "/v1/recipe?service=eks&accelerator=h100&intent=training",
        "/static/css/base.css",
    ]
    urls = [site.base_url + paths[i % len(paths)] for i in range(CONCURRENT_GETS)]

    started = time.perf_counter()
    answers = _all_at_once([lambda url=url: _request(url) for url in urls])
    wall = time.perf_counter() - started

    _report(f"{site.backend}: {CONCURRENT_GETS} concurrent GETs", answers, wall)
    assert _failures(answers) == []
    # /evidence/new/ redirects anonymous visitors to sign in (urllib follows it to a 200).
    assert {a.status for a in answers} == {200}


def test_20_concurrent_uploads_make_one_record_per_statement(site: Site) -> None:
    distinct = [base64.b64decode(b) for b in site.bundles["distinct"]]
    same = base64.b64decode(site.bundles["same"])
    uploads = [(f"distinct-{i}.tar.gz", blob) for i, blob in enumerate(distinct)]
    uploads += [("same.tar.gz", same)] * IDENTICAL_UPLOADS
    before = _evidence_count(site)

    def upload(name: str, blob: bytes) -> Answer:
        body, content_type = _multipart(name, blob)
        return _request(
            f"{site.base_url}/api/v1/evidence/",
            data=body,
            headers={"Authorization": f"Bearer {site.token}", "Content-Type": content_type},
        )

    started = time.perf_counter()
    answers = _all_at_once([lambda n=n, b=b: upload(n, b) for n, b in uploads])
    wall = time.perf_counter() - started

    _report(f"{site.backend}: {len(uploads)} concurrent uploads", answers, wall)
    assert _failures(answers) == []
    bodies = [json.loads(a.body) for a in answers]
    assert [a.status for a in answers[:DISTINCT_UPLOADS]] == [201] * DISTINCT_UPLOADS, bodies
    same_answers = answers[DISTINCT_UPLOADS:]
    assert sorted(a.status for a in same_answers) == [200] * (IDENTICAL_UPLOADS - 1) + [201]
    assert len({body["id"] for body in bodies[DISTINCT_UPLOADS:]}) == 1
    assert len({body["id"] for body in bodies}) == DISTINCT_UPLOADS + 1
    assert _evidence_count(site) == before + DISTINCT_UPLOADS + 1


@pytest.mark.parametrize("site", ["postgresql"], indirect=True)
def test_postgresql_connections_stay_bounded(site: Site) -> None:
    """After the bursts above, the server holds at most its pools' connections."""
    parts = urlsplit(site.database_url)
    with psycopg.connect(site.database_url, autocommit=True) as conn:
        held = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (parts.path.lstrip("/"),),
        ).fetchone()[0]
    print(f"\n[load] postgresql: {held} connections held by {WEB_WORKERS} workers")
    assert 0 < held <= WEB_WORKERS * POOL_MAX_SIZE


# --- bodies and locks on the real server ---------------------------------------------------


def _chunked_post(site: Site, path: str, chunks: list[bytes]) -> tuple[int, bytes]:
    """POST ``chunks`` with chunked transfer coding, reading the answer while still sending: a
    server that refuses an over-long body answers and closes before the client is done, and a
    client that only reads after sending everything meets a broken pipe instead of the answer."""
    parts = urlsplit(site.base_url)
    assert parts.hostname is not None
    assert parts.port is not None
    sock = socket.create_connection((parts.hostname, parts.port), timeout=REQUEST_TIMEOUT_S)

    def send() -> None:
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        )
        try:
            sock.sendall(head.encode())
            for chunk in chunks:
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the server answered and closed before the end of the body: read its answer

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    try:
        response = HTTPResponse(sock)
        response.begin()
        return response.status, response.read()
    finally:
        sender.join(REQUEST_TIMEOUT_S)
        sock.close()


def test_a_chunked_body_is_read_and_capped(site: Site) -> None:
    small = json.dumps({"spec": {"service": "eks", "accelerator": "h100"}}).encode()
    status, body = _chunked_post(site, "/v1/recipe", [small[:10], small[10:]])
    assert status == 200, body[:300]

    mib = 1024 * 1024
    status, body = _chunked_post(site, "/v1/recipe", [b"[" + b" " * (64 * 1024)] * 20 + [b"]"])
    assert status == 413, body[:300]
    assert json.loads(body)["details"] == {"limit_bytes": mib}


@pytest.mark.parametrize("site", ["sqlite"], indirect=True)
def test_a_write_that_cannot_get_the_sqlite_lock_answers_503(site: Site, tmp_path: Path) -> None:
    assert site.sqlite_path is not None
    # A second server on the same file with a short busy timeout, so the test waits 1 s, not 20.
    env = {**site.env, "DB_BUSY_TIMEOUT_SECONDS": "1"}
    process, base_url = _start_gunicorn(env, tmp_path / "gunicorn-lock.log")
    try:
        # The CSRF cookie and token, as a browser has them after opening the sign-in page.
        with urllib.request.urlopen(f"{base_url}/accounts/login/") as answer:
            cookie = answer.headers["Set-Cookie"].split(";")[0]
            token = answer.read().split(b'name="csrfmiddlewaretoken" value="')[1].split(b'"')[0]
        holder = sqlite3.connect(site.sqlite_path, timeout=5)
        holder.execute("BEGIN IMMEDIATE")  # another writer holds the lock
        try:
            # A failed sign-in writes (the throttle's counter).
            failed_sign_in = _request(
                f"{base_url}/accounts/login/",
                data=f"csrfmiddlewaretoken={token.decode()}&username=x&password=y".encode(),
                headers={"Cookie": cookie, "Content-Type": "application/x-www-form-urlencoded"},
            )
            reading = _request(f"{base_url}/api/v1/recipes/")
        finally:
            holder.rollback()
            holder.close()
    finally:
        _stop(process)

    assert failed_sign_in.status == 503, failed_sign_in.body[:300]
    assert b"database is busy" in failed_sign_in.body
    assert reading.status == 200  # WAL: readers are not blocked by the writer
