"""Snapshot check against a recipe with 1,000 counted evidence records (`POST /api/v1/check/`).

On a scratch PostgreSQL database with the bundled catalog and Redis as the cache (what the
site runs on): 10 real AICR summary bundles for ``h100-eks-ubuntu-training-kubeflow``, each
from a different cluster snapshot (driver, kernel, GPU Operator and AICR version varied), are
built, signed with a registered key and stored through the real ingest; then 990 more rows are
written with ``bulk_create`` as ingest stores them (the same bundle bytes and predicate, each
with its own sha256 and one of 100 counted signers), so every one of the 1,000 records has a
snapshot to read. Measured through Django's handler (``django.test.Client``, ``DEBUG=0``,
server time without network):

* the first request with an empty cache (every record's identity read from its bundle);
* ``--requests`` requests with the identities cached (p50 / p95, SQL queries per request);
* the same for a recipe with 10 records.

Prints figures; asserts nothing. Needs PostgreSQL (``BENCH_DATABASE_URL``, default a scratch
database ``aicr_w11_bench_check``, created and dropped here) and Redis (``BENCH_REDIS_URL``,
default db 11). Run: ``.venv/bin/python bench/check_snapshot.py [--requests 200]``.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import platform
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

BENCH_DB = os.environ.get(
    "BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/aicr_w11_bench_check"
)
os.environ.update(
    DJANGO_SETTINGS_MODULE="aicr_site.settings",
    DATABASE_URL=BENCH_DB,
    REDIS_URL=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/11"),
    DEBUG="0",
    SECRET_KEY="bench-only-" + "k" * 50,
    ALLOWED_HOSTS="testserver",
    SECURE_SSL_REDIRECT="0",
    LOG_LEVEL="WARNING",
)

RECIPE = "h100-eks-ubuntu-training-kubeflow"
SMALL_RECIPE = "h100-eks-ubuntu-training-slurm"
STATED = {"intent": "training", "platform": "kubeflow"}
SLURM = {"intent": "training", "platform": "slurm"}
VARIANTS = [
    {},
    {"driver": "570.86.15"},
    {"kernel": "6.8.0-1030-aws"},
    {"gpu_operator": "v25.3.0"},
    {"aicr": "v0.18.2"},
    {"driver": "570.86.15", "kernel": "6.8.0-1030-aws"},
    {"gpu_count": 4},
    {"k8s": "v1.34.1-eks-1"},
    {"gpu_operator": "v25.10.0"},
    {"driver": "575.57.08"},
]


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(pct / 100 * len(ordered)) - 1))]


def setup() -> None:
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("import_catalog", verbosity=0, stdout=io.StringIO())


def populate(recipe_name: str, total: int) -> None:
    """``len(VARIANTS)`` real ingested bundles, then copies up to ``total`` rows."""
    from evidence_app.models import Evidence, Signer, SignerClass, SignerKind
    from recipes_app.models import Catalog, Recipe
    from tests.evidence_app.coverage_data import full_snapshot, publish

    recipe = Recipe.objects.get(catalog=Catalog.objects.current(), name=recipe_name)
    now = datetime.now(UTC).replace(microsecond=0)
    real = [
        publish(
            recipe,
            full_snapshot(**variant),
            lab=f"bench-lab-{i}",
            attested_at=now - timedelta(hours=i),
            aicr_version=variant.get("aicr", "v0.19.0"),
        )
        for i, variant in enumerate(VARIANTS[: min(total, len(VARIANTS))])
    ]
    signers = []
    for n in range(100):
        identity = f"https://github.com/{recipe_name}-lab{n}/e/.github/workflows/a.yaml@main"
        source = hashlib.sha256(identity.encode()).hexdigest()
        signers.append(
            Signer(
                kind=SignerKind.KEYLESS,
                issuer="https://token.actions.githubusercontent.com",
                identity=identity,
                source_id=source,
                slug=source[:32],
                signer_class=SignerClass.COMMUNITY,
                counted=True,
                label=f"{recipe_name[:20]}-lab{n}",
            )
        )
    Signer.objects.bulk_create(signers)
    signers = list(Signer.objects.filter(label__startswith=recipe_name[:20]))
    copies = []
    for i in range(total - len(real)):
        source = real[i % len(real)]
        copies.append(
            Evidence(
                sha256=hashlib.sha256(f"{recipe_name}-{i}".encode()).hexdigest(),
                content=bytes(source.content),
                size=source.size,
                container=source.container,
                media_type=source.media_type,
                verdict=source.verdict,
                transcript=source.transcript,
                signer=signers[i % len(signers)],
                recipe=source.recipe,
                recipe_name=source.recipe_name,
                subject_digest=source.subject_digest,
                predicate_type=source.predicate_type,
                aicr_version=source.aicr_version,
                aicr_version_key=source.aicr_version_key,
                validator_catalog_version=source.validator_catalog_version,
                validator_catalog_version_key=source.validator_catalog_version_key,
                k8s_version=source.k8s_version,
                attested_at=source.attested_at - timedelta(minutes=i + 1),
                predicate=source.predicate,
            )
        )
    Evidence.objects.bulk_create(copies, batch_size=500)


def measure(label: str, snapshot_yaml: str, stated: dict[str, str], requests: int) -> None:
    from django.core.cache import cache
    from django.db import connection
    from django.test import Client

    client = Client()
    body = json.dumps({"snapshot": snapshot_yaml, **stated})

    def post() -> tuple[float, dict]:
        start = time.perf_counter()
        response = client.post("/api/v1/check/", data=body, content_type="application/json")
        elapsed = time.perf_counter() - start
        assert response.status_code == 200, response.content[:300]
        return elapsed, response.json()

    from evidence_app.coverage import service

    cache.clear()
    service._LOCAL.clear()
    cold, answer = post()
    service._LOCAL.clear()
    shared_only = post()[0]  # another process: identities from Redis, not its own memory
    times = []
    queries: list[str] = []

    def count(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        queries.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        post()
    if os.environ.get("BENCH_PROFILE"):
        import cProfile
        import pstats

        profile = cProfile.Profile()
        profile.enable()
        for _ in range(10):
            post()
        profile.disable()
        pstats.Stats(profile).sort_stats("cumulative").print_stats(25)
    for _ in range(requests):
        times.append(post()[0])
    print(
        f"{label}: {len(answer['evidence'])} evidence records compared; verdict: "
        f"{answer['verdict']!r}\n"
        f"  first request, identities not cached  {cold * 1000:8.1f} ms\n"
        f"  first request of another process (identities in Redis)  {shared_only * 1000:8.1f} ms\n"
        f"  cached, {requests} requests: p50 {percentile(times, 50) * 1000:6.1f} ms  "
        f"p95 {percentile(times, 95) * 1000:6.1f} ms  mean {statistics.mean(times) * 1000:6.1f}"
        f" ms  SQL queries {len(queries)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()

    import psycopg

    base_url, _, db_name = BENCH_DB.rpartition("/")
    with psycopg.connect(f"{base_url}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{db_name}"')
    try:
        setup()
        from evidence_app.services import signers, trust_roots
        from tests.evidence_app.coverage_data import as_yaml, full_snapshot

        trust_roots.production_root_ensure()
        signers.seeded_allowlist_ensure()
        print(
            f"python {platform.python_version()} on {platform.machine()}, "
            f"{os.cpu_count()} CPUs, PostgreSQL + Redis on loopback, DEBUG=0, one thread\n"
        )
        start = time.perf_counter()
        populate(RECIPE, 1000)
        populate(SMALL_RECIPE, 10)
        print(f"setup: 1,010 evidence records in {time.perf_counter() - start:.1f} s\n")
        snapshot = as_yaml(full_snapshot())
        measure(f"{RECIPE}, 1,000 records", snapshot, STATED, args.requests)
        measure(f"{SMALL_RECIPE}, 10 records", snapshot, SLURM, args.requests)
    finally:
        from django.db import connections

        connections.close_all()
        with psycopg.connect(f"{base_url}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
