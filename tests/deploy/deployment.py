"""What docker-compose.yml runs, each service on its own test host (tests/deploy/hosts.py):
nginx with deploy/nginx.conf (only its upstream's lines replaced) in front of two gunicorn
hosts, two Celery worker hosts and one beat, PostgreSQL (a cluster of its own, made with
initdb) and Redis (appendonly), all in production mode with every secret read from a file, as
compose mounts them. The simulated Kubernetes cluster listens on a host of its own.
"""

from __future__ import annotations

import base64
import glob
import json
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from cryptography.fernet import Fernet

from evidence_app.services.site_key import generate_pem
from tests.deploy.hosts import Host, Network, wait_until
from tests.deploy.registry import Registry
from tests.shared_data import REPO_ROOT

VENV_BIN = Path(sys.executable).parent
PG_BIN = Path(sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))[-1]).parent
HOSTS = {
    "db": 10,
    "redis": 11,
    "web1": 21,
    "web2": 22,
    "worker1": 31,
    "worker2": 32,
    "beat": 41,
    "beat2": 42,
    "proxy": 50,
    "sim": 60,
    "client": 70,
}
WEB_HOSTS = ("web1", "web2")
WORKER_HOSTS = ("worker1", "worker2")
DB_PASSWORD = "pw-" + uuid.uuid4().hex
# A running run's heartbeat older than this is taken over by the reaper. Heartbeats are written
# every STALE_SECONDS / 6; on a loaded 2-core machine one process can be held off its CPU for
# seconds at a time, and at 4 s a live run was now and then taken over (attempts 2 where 1 was
# asserted). 12 s leaves a margin of ten missed heartbeats and costs the kill test 8 s.
STALE_SECONDS = 12

# One Django start for the test's fixtures: API tokens (as `manage.py create_token` makes them)
# and distinct signed demo bundles, made with the site's own code and demo keys.
FIXTURES = """
import base64, json
from datetime import timedelta
from django.utils import timezone
from evidence_app.services import demo
from evidence_app.services.staleness import validator_catalog_version
from evidence_app.services.tokens import token_create, user_with_role
from recipes_app.models import Catalog
tokens = {}
for role in ("contributor", "maintainer"):
    user = user_with_role(username=f"multihost-{role}", role=role)
    tokens[role] = token_create(user=user, role=role)[1]
catalog = Catalog.objects.current()
recipes = demo.demo_recipes(catalog)
version = validator_catalog_version(catalog)
now = timezone.now().replace(second=0, microsecond=0)
print(json.dumps({"tokens": tokens, "bundles": [
    base64.b64encode(demo.demo_evidence_directory(
        recipes[i % len(recipes)], demo.LABS[i % 2], demo.RUNS[0],
        attested_at=now - timedelta(hours=1, minutes=i), validator_version=version,
    )).decode()
    for i in range(N)
]}))
"""


@dataclass
class Answer:
    status: int  # 0: no HTTP answer (refused, reset, timed out)
    seconds: float
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    error: str = ""

    def json(self) -> Any:
        return json.loads(self.body)


def multipart(filename: str, content: bytes) -> tuple[bytes, str]:
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


class Deployment:
    def __init__(self, tmp: Path, bundles: int = 50, worker_concurrency: int = 1) -> None:
        self.tmp = tmp
        self.bundle_count = bundles
        # One slot per worker host: a test knows which host holds a task by which is busy.
        self.worker_concurrency = worker_concurrency
        tmp.chmod(0o755)  # PostgreSQL runs as its own user and reads its files here
        (tmp / "logs").mkdir()
        self.net = Network(tmp / "logs")
        self.hosts: dict[str, Host] = {
            name: self.net.add(name, octet) for name, octet in HOSTS.items()
        }
        self.url = f"http://{self.hosts['proxy'].address}"
        self.env = self._environment()
        self.tokens: dict[str, str] = {}
        self.bundles: list[bytes] = []
        self.registry = Registry(self.hosts["sim"].address)

    def host(self, name: str) -> Host:
        return self.hosts[name]

    # --- configuration ---------------------------------------------------------------------

    def _secret(self, name: str, text: str) -> str:
        path = self.tmp / "secrets" / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        path.chmod(0o644)
        return str(path)

    def _environment(self) -> dict[str, str]:
        db, redis = self.hosts["db"].address, self.hosts["redis"].address
        keep = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "PYTHONHASHSEED")
        env = {k: v for k, v in __import__("os").environ.items() if k in keep}
        env.update(
            DJANGO_SETTINGS_MODULE="aicr_site.settings",
            DEBUG="0",
            SECRET_KEY_FILE=self._secret("secret_key", uuid.uuid4().hex * 2),
            # Two keys, newest first (rotation in progress): the first encrypts, both decrypt.
            CLUSTER_KUBECONFIG_KEY_FILE=self._secret(
                "cluster_kubeconfig_key",
                f"{Fernet.generate_key().decode()}\n{Fernet.generate_key().decode()}\n",
            ),
            SITE_SIGNING_KEY_FILE=self._secret("site_signing_key", generate_pem().decode()),
            DATABASE_PASSWORD_FILE=self._secret("db_password", DB_PASSWORD + "\n"),
            DATABASE_URL=f"postgres://aicr@{db}:5432/aicr",
            REDIS_URL=f"redis://{redis}:6379/0",
            ALLOWED_HOSTS=self.hosts["proxy"].address,
            SECURE_SSL_REDIRECT="0",
            TRUST_X_FORWARDED_FOR="1",
            RUN_EVIDENCE_KEY_SIGNED_ACCEPTED="1",
            # The OCI registry of the test (tests/deploy/registry.py) is plain HTTP on a
            # loopback address, as every host's is here.
            EVIDENCE_OCI_ALLOW_LOOPBACK_HTTP="1",
            STATIC_ROOT=str(self.tmp / "static"),
            LOG_LEVEL="INFO",
            EVIDENCE_UPLOAD_RATE="100000/min",
            DB_POOL_MAX_SIZE="8",
            DB_POOL_TIMEOUT_SECONDS="3",
            STARTUP_WAIT_SECONDS="240",
            VALIDATION_HEARTBEAT_STALE_SECONDS=str(STALE_SECONDS),
            VALIDATION_REAP_INTERVAL_SECONDS="1",
            VALIDATION_MAX_ATTEMPTS="3",
            PYTHONDONTWRITEBYTECODE="1",
        )
        return env

    # --- services --------------------------------------------------------------------------

    def init_postgres(self) -> None:
        data = self.tmp / "pg"
        data.mkdir()
        shutil.chown(data, "postgres", "postgres")
        data.chmod(0o700)
        pwfile = Path(self._secret("pg_pwfile", DB_PASSWORD + "\n"))
        subprocess.run(
            [
                "runuser",
                "-u",
                "postgres",
                "--",
                str(PG_BIN / "initdb"),
                "-D",
                str(data),
                "-U",
                "aicr",
                f"--pwfile={pwfile}",
                "-A",
                "scram-sha-256",
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        net = self.hosts["db"].address.rsplit(".", 1)[0]
        with (data / "pg_hba.conf").open("a") as hba:
            hba.write(f"host all all {net}.0/24 scram-sha-256\n")

    def start_postgres(self) -> None:
        host = self.hosts["db"]
        host.start(
            [
                "runuser",
                "-u",
                "postgres",
                "--",
                str(PG_BIN / "postgres"),
                "-D",
                str(self.tmp / "pg"),
                "-c",
                f"listen_addresses={host.address}",
                "-c",
                "unix_socket_directories=",
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
                "-c",
                "max_connections=300",
            ],
            env=self.env,
            log="postgres",
        )

    def start_redis(self) -> None:
        host = self.hosts["redis"]
        (self.tmp / "redis").mkdir(exist_ok=True)
        host.start(
            [
                "redis-server",
                "--bind",
                host.address,
                "--port",
                "6379",
                "--protected-mode",
                "no",
                "--dir",
                str(self.tmp / "redis"),
                "--save",
                "",
                "--appendonly",
                "yes",
                # As compose runs it: every write reaches the AOF file before the reply (a killed
                # process loses nothing); fsync once a second (a machine crash, at most 1 s).
                "--appendfsync",
                "everysec",
            ],
            env=self.env,
            log="redis",
        )

    def start_web(self, name: str) -> None:
        host = self.hosts[name]
        host.start(
            [
                str(VENV_BIN / "gunicorn"),
                "aicr_site.wsgi:application",
                "--bind",
                f"{host.address}:8000",
                "--workers",
                "1",
                "--threads",
                "8",
                "--worker-class",
                "aicr_site.gunicorn_worker.ThreadWorker",
                "--timeout",
                "120",
                "--graceful-timeout",
                "10",
                # gunicorn 25+ opens a control socket, by default at ~/.gunicorn/gunicorn.ctl:
                # the same path for every gunicorn of one user, so here (one machine, one HOME)
                # the second web host's took the first one's. A host of its own, a path of its
                # own (in a container, HOME is the container's).
                "--control-socket",
                str(self.tmp / f"{name}-gunicorn.ctl"),
            ],
            env=self.env,
            log="gunicorn",
            cwd=REPO_ROOT,
        )

    def start_worker(self, name: str) -> None:
        self.hosts[name].start(
            [
                str(VENV_BIN / "celery"),
                "-A",
                "aicr_site",
                "worker",
                "--queues",
                "validation,ingest,celery",
                "--concurrency",
                str(self.worker_concurrency),
                "-n",
                f"{name}@%h",
                "--without-gossip",
                "--without-mingle",
                "-l",
                "INFO",
            ],
            env=self.env,
            log="worker",
            cwd=REPO_ROOT,
        )

    def start_beat(self, name: str = "beat") -> None:
        self.hosts[name].start(
            [
                str(VENV_BIN / "celery"),
                "-A",
                "aicr_site",
                "beat",
                "-l",
                "INFO",
                "--schedule",
                str(self.tmp / f"{name}-schedule"),
            ],
            env=self.env,
            log="beat",
            cwd=REPO_ROOT,
        )

    def start_proxy(self) -> None:
        conf = (REPO_ROOT / "deploy" / "nginx.conf").read_text()
        servers = "".join(
            f"    server {self.hosts[name].address}:8000 max_fails=1 fail_timeout=5s;\n"
            for name in WEB_HOSTS
        )
        site, count = re.subn(r"(?m)^    server web:8000[^\n]*\n", servers, conf)
        assert count == 1, "deploy/nginx.conf's upstream has no `server web:8000` line"
        nginx = self.tmp / "nginx"
        nginx.mkdir()
        (nginx / "site.conf").write_text(site)
        (nginx / "nginx.conf").write_text(
            f"user root; worker_processes 1; daemon off; pid {nginx}/nginx.pid;\n"
            f"error_log {nginx}/error.log warn;\n"
            "events { worker_connections 1024; }\n"
            "http {\n"
            # When each request ended and which web host(s) it went to (tests read it).
            "  log_format hosts '$msec $status $request_method $upstream_addr';\n"
            f"  access_log {nginx}/access.log hosts;\n"
            f"  client_body_temp_path {nginx}/body; proxy_temp_path {nginx}/proxy;\n"
            f"  fastcgi_temp_path {nginx}/f; uwsgi_temp_path {nginx}/u; scgi_temp_path {nginx}/s;\n"
            f"  include {nginx}/site.conf;\n"
            "}\n"
        )
        self.hosts["proxy"].start(
            ["/usr/sbin/nginx", "-c", str(nginx / "nginx.conf")], env=self.env, log="nginx"
        )

    def manage(self, *args: str, debug: bool = False) -> str:
        env = {**self.env, "DEBUG": "1"} if debug else self.env
        return self.hosts["web1"].run([sys.executable, "manage.py", *args], env=env, cwd=REPO_ROOT)

    # --- talking to it ---------------------------------------------------------------------

    def request(
        self,
        path: str,
        *,
        data: bytes | None = None,
        headers: dict[str, str] | None = None,
        token: str | None = None,
        timeout: float = 60,
    ) -> Answer:
        return self.hosts["client"].call(_request, self.url + path, data, headers, token, timeout)

    def api_json(self, path: str, payload: dict[str, Any], token: str) -> Answer:
        return self.request(
            path,
            data=json.dumps(payload).encode(),
            headers={"Content-Type": "application/json"},
            token=token,
        )

    def upload(self, index: int) -> Answer:
        body, content_type = multipart(f"bundle-{index}.tar.gz", self.bundles[index])
        return self.request(
            "/api/v1/evidence/",
            data=body,
            headers={"Content-Type": content_type},
            token=self.tokens["contributor"],
        )

    def oci_upload(self, ref: str) -> Answer:
        return self.api_json("/api/v1/evidence/", {"oci_ref": ref}, self.tokens["contributor"])

    def sql(
        self, query: str, params: tuple[Any, ...] = (), dbname: str = "aicr"
    ) -> list[tuple[Any, ...]]:
        def run() -> list[tuple[Any, ...]]:
            with psycopg.connect(
                host=self.hosts["db"].address,
                dbname=dbname,
                user="aicr",
                password=DB_PASSWORD,
                connect_timeout=5,
                autocommit=True,
            ) as conn:
                cursor = conn.execute(query, params)
                return cursor.fetchall() if cursor.description else []

        return self.hosts["client"].call(run)

    def ready(self) -> bool:
        return self.request("/ready", timeout=10).status == 200

    def proxied(self) -> list[tuple[float, int, str, list[str]]]:
        """nginx's access log: (when it answered, status, method, the web hosts it tried in
        order: more than one when it moved on from a host that refused)."""
        out = []
        for line in (self.tmp / "nginx" / "access.log").read_text().splitlines():
            at, status, method, *upstreams = line.replace(",", " ").split()
            out.append((float(at), int(status), method, [u.split(":")[0] for u in upstreams]))
        return out

    def logs(self, *names: str) -> str:
        out = []
        for path in sorted((self.tmp / "logs").glob("*.log")):
            if not names or any(path.name.startswith(n) for n in names):
                out.append(f"--- {path.name}\n{path.read_text(errors='replace')[-2500:]}")
        return "\n".join(out)

    # --- the whole thing -------------------------------------------------------------------

    def restore(self, dump: Path) -> None:
        """Load a ``pg_dump -Fc`` file into the site's database (before ``migrate``, which then
        applies only what is newer), over the network from the client host, as an operator
        restoring a backup would; every object owned by the site's user."""
        self.hosts["client"].run(
            [
                str(PG_BIN / "pg_restore"),
                "-h",
                self.hosts["db"].address,
                "-U",
                "aicr",
                "-d",
                "aicr",
                "--no-owner",
                "--no-privileges",
                "--jobs",
                "2",
                str(dump),
            ],
            env={**self.env, "PGPASSWORD": DB_PASSWORD},
            timeout=1800,
        )

    def up(self, restore: Path | None = None) -> None:
        """Start everything in the order nothing depends on: workers, beat, web (once its
        static files are collected) and the proxy first, PostgreSQL and Redis last (each process
        waits, or answers 503). ``restore``: a dump loaded into the database first (the
        benchmark's 100,000 records, bench/multihost.py)."""
        self.init_postgres()
        static = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                self.hosts["web1"].netns,
                sys.executable,
                "manage.py",
                "collectstatic",
                "--no-input",
                "-v",
                "0",
            ],
            env=self.env,
            cwd=REPO_ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for name in WORKER_HOSTS:
            self.start_worker(name)
        self.start_beat()
        # The image collects its static files at build time: a web process never starts
        # without them (aicr_site/startup.py refuses to), so the web hosts wait for them here.
        _, err = static.communicate(timeout=300)
        assert static.returncode == 0, err.decode()[-2000:]
        for name in WEB_HOSTS:
            self.start_web(name)
        self.start_proxy()
        wait_until(
            lambda: self.request("/ready", timeout=10).status == 503,
            "the site to answer /ready (503) before its database",
            60,
            self.logs,
        )
        self.early_ready = self.request("/ready", timeout=10)
        self.start_postgres()
        self.start_redis()
        self.hosts["sim"].call(self.registry.start)
        wait_until(
            lambda: bool(self.sql("SELECT 1", dbname="postgres")), "PostgreSQL", 60, self.logs
        )
        self.sql("CREATE DATABASE aicr", dbname="postgres")
        if restore is not None:
            self.restore(restore)
        self.manage("migrate", "--no-input", "-v", "0")
        self.manage("import_catalog")
        self.manage("seed_demo", debug=True)
        out = self.manage(
            "shell", "-c", FIXTURES.replace("range(N)", f"range({self.bundle_count})")
        )
        made = json.loads(out.strip().splitlines()[-1])
        self.tokens = made["tokens"]
        self.bundles = [base64.b64decode(b) for b in made["bundles"]]
        wait_until(self.ready, "/ready through nginx", 120, self.logs)

    def close(self) -> None:
        self.registry.stop()
        self.net.close()


def _request(
    url: str, data: bytes | None, headers: dict[str, str] | None, token: str | None, timeout: float
) -> Answer:
    headers = dict(headers or {})
    if token:
        headers["Authorization"] = f"Bearer {token}"
    started = time.perf_counter()
    req = urllib.request.Request(url, data=data, headers=headers)
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(req, timeout=timeout) as response:
            body = response.read()
            return Answer(
                response.status, time.perf_counter() - started, body, dict(response.headers)
            )
    except urllib.error.HTTPError as exc:
        return Answer(exc.code, time.perf_counter() - started, exc.read(), dict(exc.headers))
    except OSError as exc:
        return Answer(0, time.perf_counter() - started, error=repr(exc))


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def pause(host: Host) -> None:
    host.kill_all(signal.SIGSTOP)


def resume(host: Host) -> None:
    host.kill_all(signal.SIGCONT)
