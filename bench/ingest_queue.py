"""`bench/ingest_queue.py`: sustained ingest through the queue (issue 22: 202 when queued,
verification on ``ingest`` workers, >= 200 bundles/s with 2 worker processes).

On a scratch PostgreSQL database with the bundled catalog, a private Sigstore instance
(tests/sigstore_private.py) trusted and the seeded allowlist, ``--n`` distinct keyless bundles
are signed beforehand, half by an allowlisted first-party identity (counted: each moves its
recipe's stored consensus) and half by an unlisted one (reported). Then:

1. direct: ``--direct`` of them ``POST /api/v1/evidence/`` in this process, one thread, each
   answered 201 after verifying (the request does all the work);
2. queued: the rest sent with ``Prefer: respond-async`` from this process while ``--workers``
   Celery worker processes (``-P solo``, queue ``ingest``, Redis db 15 flushed first) verify
   them: the 202s per second the web side answers, and the bundles per second from the first
   POST until every upload is done (sustained ingest), with each upload's outcome checked.

Everything shares this box's cores (web process, workers, PostgreSQL, Redis). Prints figures;
asserts nothing. Run: ``.venv/bin/python bench/ingest_queue.py [--n 2000] [--workers 2]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

BENCH_DB = os.environ.get(
    "BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/aicr_bench_queue"
)
BENCH_REDIS = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/15")
os.environ.update(
    DJANGO_SETTINGS_MODULE="aicr_site.settings",
    DATABASE_URL=BENCH_DB,
    REDIS_URL=BENCH_REDIS,
    DEBUG="0",
    SECRET_KEY="bench-only-" + "k" * 50,
    ALLOWED_HOSTS="testserver",
    SECURE_SSL_REDIRECT="0",
    LOG_LEVEL="WARNING",
    EVIDENCE_UPLOAD_RATE="1000000/min",  # the bench measures ingest, not the per-user throttle
    DB_CONN_MAX_AGE="60",
)
CELERY = Path(sys.executable).with_name("celery")


def _bench_secrets() -> None:
    """The two secrets a DEBUG-off process refuses to start without, made up for this run."""
    from cryptography.fernet import Fernet
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    os.environ.setdefault("SITE_SIGNING_KEY", pem.decode())
    os.environ.setdefault("CLUSTER_KUBECONFIG_KEY", Fernet.generate_key().decode())


_bench_secrets()
FIRST_PARTY = "https://github.com/NVIDIA/aicr/.github/workflows/uat-aws.yaml@refs/heads/main"
UNLISTED = "https://github.com/somelab/gpu-evidence/.github/workflows/aicr.yaml@refs/heads/main"
GITHUB_ISSUER = "https://token.actions.githubusercontent.com"


def scratch_database() -> None:
    import psycopg

    base_url, _, name = BENCH_DB.rpartition("/")
    with psycopg.connect(f"{base_url}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def setup(n: int) -> tuple[list[bytes], str]:
    """The signed bundles and a contributor's token."""
    import io

    import django

    django.setup()
    from django.core.management import call_command

    from evidence_app.services import signers, trust_roots
    from evidence_app.services.tokens import token_create, user_with_role
    from recipes_app.models import Catalog, Recipe
    from tests.evidence_factories import statement_for
    from tests.sigstore_private import PrivateSigstore

    call_command("migrate", verbosity=0)
    call_command("import_catalog", verbosity=0, stdout=io.StringIO())
    sigstore = PrivateSigstore()
    trust_roots.trust_root_add(
        name="bench instance", trusted_root_json=sigstore.trusted_root_json()
    )
    signers.seeded_allowlist_ensure()
    recipes = list(Recipe.objects.filter(catalog=Catalog.objects.current()).order_by("name"))
    base = datetime.now(UTC) - timedelta(hours=1)
    started = time.perf_counter()
    bundles = [
        sigstore.sign_dsse(
            statement_for(recipes[i % len(recipes)], attested_at=base - timedelta(seconds=i)),
            identity=FIRST_PARTY if i % 2 == 0 else UNLISTED,
            issuer=GITHUB_ISSUER,
        ).bundle
        for i in range(n)
    ]
    print(f"  signed {n} bundles in {time.perf_counter() - started:.1f} s")
    user = user_with_role(username="bench-contributor", role="contributor")
    return bundles, token_create(user=user, role="contributor")[1]


def post(client: object, bundle: bytes, *, queued: bool) -> object:
    from django.core.files.uploadedfile import SimpleUploadedFile

    files = {"bundle": SimpleUploadedFile("e.sigstore.json", bundle, "application/json")}
    headers = {"HTTP_PREFER": "respond-async"} if queued else {}
    return client.post("/api/v1/evidence/", files, **headers)  # type: ignore[attr-defined]


def start_workers(count: int, logs: Path) -> list[subprocess.Popen[bytes]]:
    env = {**os.environ, "DB_CONN_MAX_AGE": "60"}
    command = [
        str(CELERY), "-A", "aicr_site", "worker", "-Q", "ingest", "-P", "solo",
        "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "WARNING",
    ]  # fmt: skip
    workers = []
    for i in range(count):
        log = (logs / f"worker{i}.log").open("wb")
        workers.append(
            subprocess.Popen(
                [*command, "-n", f"bench{i}@%h"], cwd=REPO, env=env, stdout=log, stderr=log
            )
        )
    return workers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="bundles in all")
    parser.add_argument("--direct", type=int, default=200, help="of them, uploaded directly")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    import redis

    redis.Redis.from_url(BENCH_REDIS).flushdb()
    scratch_database()
    print(
        f"python {platform.python_version()}, {os.cpu_count()} CPUs, load "
        f"{os.getloadavg()[0]:.1f}, PostgreSQL and Redis on loopback, DEBUG=0\n"
    )
    bundles, token = setup(args.n)
    from django.db import connections
    from django.db.models import Count
    from django.test import Client

    from evidence_app.models import UploadLog, UploadState

    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    direct, rest = bundles[: args.direct], bundles[args.direct :]

    times = []
    for bundle in direct:
        started = time.perf_counter()
        response = post(client, bundle, queued=False)
        times.append(time.perf_counter() - started)
        assert response.status_code == 201, response.content[:300]  # type: ignore[attr-defined]
    print(
        f"1. direct: {len(direct)} uploads answered 201 in {sum(times):.1f} s = "
        f"{len(direct) / sum(times):.1f} bundles/s, one thread; per upload p50 "
        f"{statistics.median(times) * 1000:.1f} ms"
    )

    logs = Path(tempfile.mkdtemp(prefix="bench-ingest-queue-"))
    workers = start_workers(args.workers, logs)
    try:
        time.sleep(4)  # the workers connect before the first message
        accept_times = []
        started = time.perf_counter()
        for bundle in rest:
            t = time.perf_counter()
            response = post(client, bundle, queued=True)
            accept_times.append(time.perf_counter() - t)
            assert response.status_code == 202, response.content[:300]  # type: ignore[attr-defined]
        accepted_s = time.perf_counter() - started
        pending = UploadLog.objects.exclude(state=UploadState.DONE)
        while pending.exists():
            if time.perf_counter() - started > 1800:
                raise SystemExit(f"not drained after 30 min: {pending.count()} left")
            time.sleep(0.2)
        drained_s = time.perf_counter() - started
        connections.close_all()
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait(timeout=30)

    outcomes = dict(
        UploadLog.objects.filter(channel="api").values_list("outcome").annotate(n=Count("pk"))
    )
    accept_times.sort()
    print(
        f"2. queued: {len(rest)} uploads answered 202 in {accepted_s:.1f} s = "
        f"{len(rest) / accepted_s:.0f}/s (p50 {statistics.median(accept_times) * 1000:.1f} ms, "
        f"p95 {accept_times[int(len(accept_times) * 0.95)] * 1000:.1f} ms), while "
        f"{args.workers} workers verified them; all done {drained_s:.1f} s after the first = "
        f"{len(rest) / drained_s:.1f} bundles/s sustained (worker logs in {logs})"
    )
    print(f"   outcomes of every upload: {outcomes}, load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
