"""A release's Qualified profiles page and ``/check/`` at N evidence records (default 100,000).

On a scratch PostgreSQL database with the bundled catalog and Redis as the cache (what the
site runs on): 10 real AICR summary bundles for ``h100-eks-ubuntu-training-kubeflow`` (cluster
snapshots with driver, kernel, GPU Operator and AICR version varied) are built, signed and
stored through the real ingest, which records their identities (``Evidence.identities``).
Then rows as ingest stores them (a source bundle's predicate and recorded identities, here with
the release's operator, chart, AICR and validator image digests added as a BOM would list them,
and every declared check passed), each with its own sha256 and one of 100 counted keyless
signers: ``--per-recipe`` rows for each of the release's 5 claimed recipes and the rest spread
over the catalog's other recipes, N in all. 10 rows per recipe are written with
``bulk_create``, the rest are copies of them made in SQL (``INSERT … SELECT`` over
``generate_series``, one statement per recipe), and the stored consensus badges are then
recomputed over them all, as ingest's hook would have kept them. The copies'
stored bytes are a placeholder: neither the page nor ``/check/`` reads bytes (that is the
point of recording identities at ingest).

The statuses are computed when the release is declared and stored (``ReleaseProfile``); the
bench prints how long the declaration and one recipe's refresh (what a counted ingest of
that recipe adds) take. Measured through Django's handler (``django.test.Client``,
``DEBUG=0``, server time without network): the page ``/releases/<id>/`` and
``GET /api/v1/releases/<id>/profiles/`` (first request, then p50/p95 of ``--requests``), and
``POST /api/v1/check/`` for the benched recipe (first request with an empty cache, then warm
p50/p95). Prints figures; asserts nothing.

Needs PostgreSQL (``BENCH_DATABASE_URL``, default a scratch database ``aicr_bench_releases``,
created and dropped here) and Redis (``BENCH_REDIS_URL``, default db 12). Run:
``.venv/bin/python bench/releases.py [--records 100000] [--requests 100]``.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import io
import json
import os
import platform
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

BENCH_DB = os.environ.get(
    "BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/aicr_bench_releases"
)
os.environ.update(
    DJANGO_SETTINGS_MODULE="aicr_site.settings",
    DATABASE_URL=BENCH_DB,
    REDIS_URL=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/12"),
    DEBUG="0",
    SECRET_KEY="bench-only-" + "k" * 50,
    ALLOWED_HOSTS="testserver",
    SECURE_SSL_REDIRECT="0",
    LOG_LEVEL="WARNING",
)

RECIPE = "h100-eks-ubuntu-training-kubeflow"
STATED = {"intent": "training", "platform": "kubeflow"}
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
IMAGES = {
    "ghcr.io/nvidia/aicr-operator": "sha256:" + "1" * 64,
    "ghcr.io/nvidia/charts/aicr-operator": "sha256:" + "2" * 64,
    "ghcr.io/nvidia/aicr": "sha256:" + "3" * 64,
}
VALIDATOR = "ghcr.io/nvidia/aicr-validators/deployment"


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(pct / 100 * len(ordered)) - 1))]


def setup() -> None:
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("collectstatic", verbosity=0, interactive=False)  # DEBUG=0 serves the manifest
    call_command("import_catalog", verbosity=0, stdout=io.StringIO())


def _with_release_images(identities: dict, digest: str) -> dict:
    out = copy.deepcopy(identities)
    images = [
        i for i in out.get("images", []) if i["image"] not in IMAGES and i["image"] != VALIDATOR
    ]
    images += [
        {"image": repo, "tag": "v1", "digest": d, "source": "bom", "role": "workload"}
        for repo, d in IMAGES.items()
    ]
    images.append(
        {
            "image": VALIDATOR,
            "tag": "v1",
            "digest": digest,
            "source": "predicate",
            "role": "validator",
        }
    )
    out["images"] = images
    return out


TEMPLATES = 10  # rows per recipe written through the ORM; the rest are SQL copies of them


def _template(target, source, signer, i: int):  # type: ignore[no-untyped-def]
    """One row as ingest stores it, for ``target``: ``source``'s predicate and recorded
    identities (plus the release's image digests), every declared check passed."""
    from evidence_app.consensus.rules import declared_checks
    from evidence_app.coverage.stored import identity_key
    from evidence_app.models import Evidence

    results: dict = {}
    for phase, name in declared_checks(target.checks):
        results.setdefault(phase, {})[name] = {"status": "passed"}
    identities = _with_release_images(source.identities, "sha256:" + "4" * 64)
    return Evidence(
        sha256=hashlib.sha256(f"bench-template-{target.name}-{i}".encode()).hexdigest(),
        content=b"placeholder",
        size=11,
        container=source.container,
        media_type=source.media_type,
        verdict=source.verdict,
        transcript=[],
        signer=signer,
        recipe=target,
        recipe_name=target.name,
        subject_digest=target.digest,
        predicate_type=source.predicate_type,
        aicr_version=source.aicr_version,
        aicr_version_key=source.aicr_version_key,
        validator_catalog_version=source.validator_catalog_version,
        validator_catalog_version_key=source.validator_catalog_version_key,
        k8s_version=source.k8s_version,
        attested_at=source.attested_at - timedelta(seconds=i + 1),
        predicate=source.predicate,
        identity=source.identity,
        gpu_model=source.gpu_model,
        gpu_count=source.gpu_count,
        identities=identities,
        identity_key=identity_key(identities, source.identity),  # as ingest records it
        check_results=results,
    )


def _copy_sql() -> str:
    """``INSERT … SELECT``: ``%(n)s`` copies of a recipe's templates, each with its own sha256,
    one of the bench signers and an older attestation time (one statement per recipe)."""
    from django.db import connection

    from evidence_app.models import Evidence

    q = connection.ops.quote_name
    table = q(Evidence._meta.db_table)
    own = {"id", "sha256", "signer_id", "attested_at"}
    columns = [f.column for f in Evidence._meta.concrete_fields if f.column not in own]
    copied = ", ".join(f"t.{q(c)}" for c in columns)
    # Identifiers from the model's metadata; the values are parameters.
    return (
        f"INSERT INTO {table} ({', '.join(q(c) for c in columns)}, sha256, signer_id, "  # noqa: S608
        f"attested_at) SELECT {copied}, "
        "encode(sha256(convert_to('bench-' || t.recipe_name || '-' || g, 'UTF8')), 'hex'), "
        "(%(signers)s::bigint[])[1 + (g %% cardinality(%(signers)s::bigint[]))], "
        "t.attested_at - make_interval(secs => 60 + g) "
        f"FROM generate_series(0, %(n)s - 1) AS g JOIN (SELECT e.*, row_number() OVER "
        f"(ORDER BY e.id) - 1 AS k FROM {table} e WHERE e.recipe_name = %(recipe)s "
        "AND e.content = %(placeholder)s) AS t "
        f"ON t.k = g %% {TEMPLATES}"
    )


def populate(total: int, per_recipe: int) -> tuple[list[str], int]:
    """The 10 real bundles through ingest, ``TEMPLATES`` ORM rows per recipe, then SQL copies
    of them (``INSERT … SELECT``): 100,000 rows in seconds, where per-row ORM writes took
    minutes. The product's invariants are kept: every row is as ingest would store it, and
    the stored consensus badges are recomputed over them (``consensus_refresh``), as the
    ingest hook would have done row by row."""
    from django.db import connection

    from evidence_app.consensus.stored import consensus_refresh
    from evidence_app.models import Evidence, Signer, SignerClass, SignerKind
    from recipes_app.models import Catalog, Recipe
    from tests.evidence_app.coverage_data import full_snapshot, publish

    catalog = Catalog.objects.current()
    recipe = Recipe.objects.get(catalog=catalog, name=RECIPE)
    now = datetime.now(UTC).replace(microsecond=0)
    real = [
        publish(
            recipe,
            full_snapshot(**variant),
            lab=f"bench-lab-{i}",
            attested_at=now - timedelta(hours=i),
            aicr_version=variant.get("aicr", "v0.19.0"),
            redact=False,
        )
        for i, variant in enumerate(VARIANTS)
    ]
    signers = []
    for n in range(100):
        identity = f"https://github.com/bench-lab{n}/e/.github/workflows/a.yaml@main"
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
                label=f"bench-lab{n}",
            )
        )
    Signer.objects.bulk_create(signers)
    signers = list(Signer.objects.filter(label__startswith="bench-lab").order_by("pk"))
    recipes = list(Recipe.objects.filter(catalog=catalog, profile="").order_by("name"))
    claimed = [RECIPE, *[r.name for r in recipes if r.name != RECIPE][:4]]
    others = [r for r in recipes if r.name not in claimed]
    counts = {name: per_recipe for name in claimed}
    rest = max(0, total - len(real) - per_recipe * len(claimed))
    for i, r in enumerate(others):
        counts[r.name] = rest // len(others) + (1 if i < rest % len(others) else 0)
    by_name = {r.name: r for r in recipes}
    templates = [
        _template(by_name[name], real[i % len(real)], signers[i % len(signers)], i)
        for name, n in counts.items()
        for i in range(min(n, TEMPLATES))
    ]
    Evidence.objects.bulk_create(templates, batch_size=500)
    sql, ids = _copy_sql(), [s.pk for s in signers]
    with connection.cursor() as cursor:
        for name, n in counts.items():
            if n > TEMPLATES:
                cursor.execute(
                    sql,
                    {
                        "n": n - TEMPLATES,
                        "signers": ids,
                        "recipe": name,
                        "placeholder": b"placeholder",
                    },
                )
        cursor.execute(f"ANALYZE {connection.ops.quote_name(Evidence._meta.db_table)}")
    consensus_refresh()
    return claimed, Evidence.objects.count()


def timed(label: str, call, requests: int) -> None:  # type: ignore[no-untyped-def]
    from django.db import connection

    start = time.perf_counter()
    call()
    first = time.perf_counter() - start
    queries: list[str] = []

    def count(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        queries.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        call()
    times = []
    for _ in range(requests):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    print(
        f"{label}\n  first {first * 1000:8.1f} ms   warm p50 {percentile(times, 50) * 1000:6.1f} ms"
        f"  p95 {percentile(times, 95) * 1000:6.1f} ms  ({requests} requests, "
        f"{len(queries)} SQL queries each)"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--per-recipe", type=int, default=1_000)
    parser.add_argument("--requests", type=int, default=100)
    args = parser.parse_args()

    import psycopg

    admin = BENCH_DB.rsplit("/", 1)[0] + "/postgres"
    name = BENCH_DB.rsplit("/", 1)[1]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        setup()
        start = time.perf_counter()
        claimed, count = populate(args.records, args.per_recipe)
        print(f"populated {count:,} evidence records in {time.perf_counter() - start:.0f} s")
        print(f"python {platform.python_version()}, load average {os.getloadavg()}")
        from django.core.cache import cache
        from django.test import Client

        from evidence_app.releases.declare import release_declare
        from tests.evidence_app.coverage_data import as_yaml, full_snapshot

        start = time.perf_counter()
        release = release_declare(
            {
                "name": "bench",
                "operator_image": "ghcr.io/nvidia/aicr-operator@"
                + IMAGES["ghcr.io/nvidia/aicr-operator"],
                "operator_chart": "ghcr.io/nvidia/charts/aicr-operator@"
                + IMAGES["ghcr.io/nvidia/charts/aicr-operator"],
                "aicr_image": f"ghcr.io/nvidia/aicr@{IMAGES['ghcr.io/nvidia/aicr']}",
                "validator_images": [{"image": VALIDATOR, "digest": "sha256:" + "4" * 64}],
                "profiles": claimed,
            }
        )
        declared = time.perf_counter() - start
        # What a counted ingest of one of its recipes adds to the ingest's transaction: the
        # stored statuses recomputed (the newest candidates read and compared), once.
        from evidence_app.releases.stored import profiles_refresh

        start = time.perf_counter()
        profiles_refresh([RECIPE])
        refreshed = time.perf_counter() - start
        print(
            f"declare (stores {len(claimed)} statuses) {declared * 1000:.1f} ms; "
            f"refresh of one recipe's status (an ingest's share) {refreshed * 1000:.1f} ms"
        )
        client = Client()
        profiles = client.get(f"/api/v1/releases/{release.pk}/profiles/").json()
        print("statuses:", {p["recipe"]: p["status"] for p in profiles})

        def page() -> None:
            response = client.get(f"/releases/{release.pk}/")
            assert response.status_code == 200

        def api() -> None:
            assert client.get(f"/api/v1/releases/{release.pk}/profiles/").status_code == 200

        body = json.dumps({"snapshot": as_yaml(full_snapshot()), **STATED})

        def check() -> None:
            response = client.post("/api/v1/check/", data=body, content_type="application/json")
            assert response.status_code == 200, response.content[:300]

        timed(
            f"Qualified profiles page (/releases/<id>/, {len(claimed)} profiles)",
            page,
            args.requests,
        )
        timed("GET /api/v1/releases/<id>/profiles/", api, args.requests)
        cache.clear()
        answer = client.post("/api/v1/check/", data=body, content_type="application/json").json()
        print(f"/check/ compares {len(answer['evidence'])} records; verdict {answer['verdict']!r}")
        cache.clear()
        timed(
            f"POST /api/v1/check/ ({RECIPE}, cache cleared before the first)", check, args.requests
        )
    finally:
        from django.db import connections

        connections.close_all()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
