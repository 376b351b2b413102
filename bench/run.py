"""`make bench`: the speed figures the README and docs/benchmarks.md report.

1. Resolver: load the bundled catalog, resolve all 45 leaves and the 427 coverage projections
   (every non-empty subset of every overlay's stated criteria), emit YAML and digests; one process.
2. Pages: `/recipes/` and `/api/v1/recipes/` with filters, 200 requests each through Django's
   request handler (server time, no network), on PostgreSQL with 1,000 recipes in the current
   catalog; SQL queries per request are counted too.

Needs PostgreSQL for part 2 (`BENCH_DATABASE_URL`, default a scratch database `aicr_bench` on
127.0.0.1:5432, created and dropped here). Prints figures; asserts nothing.
"""

from __future__ import annotations

import itertools
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

BENCH_DB = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/aicr_bench")
os.environ.update(
    DJANGO_SETTINGS_MODULE="aicr_site.settings",
    DATABASE_URL=BENCH_DB,
    DEBUG="0",
    SECRET_KEY="bench-only-" + "k" * 50,
    ALLOWED_HOSTS="testserver",
    SECURE_SSL_REDIRECT="0",
    LOG_LEVEL="WARNING",
)
os.environ.pop("REDIS_URL", None)

DIMS = ("service", "accelerator", "intent", "os", "platform")


def projection_queries(files: dict[str, str]) -> list[dict[str, str]]:
    """AICR's coverage projections: every non-empty subset of each overlay's stated dims."""
    import yaml

    seen: dict[tuple[tuple[str, str], ...], None] = {}
    for path, text in sorted(files.items()):
        if not path.startswith("overlays/"):
            continue
        criteria = ((yaml.safe_load(text) or {}).get("spec") or {}).get("criteria") or {}
        stated = [(d, str(criteria[d])) for d in DIMS if criteria.get(d) not in (None, "", "any")]
        for size in range(1, len(stated) + 1):
            for subset in itertools.combinations(stated, size):
                seen.setdefault(tuple(sorted(subset)), None)
    return [dict(key) for key in seen]


def bench_resolver(rounds: int = 7) -> None:
    from recipes_app import resolver
    from recipes_app.snapshot import BUNDLED_SNAPSHOT, read_snapshot

    files = read_snapshot(BUNDLED_SNAPSHOT).files
    queries = projection_queries(files)
    timings: dict[str, list[float]] = {"load": [], "leaves": [], "projections": [], "yaml": []}
    errors = 0
    for _ in range(rounds):
        t0 = time.perf_counter()
        catalog = resolver.load_catalog(files)
        t1 = time.perf_counter()
        leaves = resolver.resolve_leaves(catalog, version="dev")
        t2 = time.perf_counter()
        errors = 0
        for query in queries:
            try:
                resolver.resolve(catalog, resolver.parse_criteria(query), version="dev")
            except resolver.ResolutionError:
                errors += 1
        t3 = time.perf_counter()
        for doc in leaves.values():
            resolver.recipe_digest(doc)
            resolver.parity_digest(doc)
        t4 = time.perf_counter()
        for key, value in zip(timings, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
            timings[key].append(value)
    totals = [sum(parts) for parts in zip(*timings.values(), strict=True)]
    print(
        f"## Resolver ({len(leaves)} leaves + {len(queries)} projections, "
        f"{len(queries) - errors} success / {errors} error; {rounds} rounds, one process)"
    )
    for key, values in timings.items():
        print(f"  {key:<12} median {statistics.median(values) * 1000:8.1f} ms")
    resolve_only = [
        sum(p) for p in zip(timings["load"], timings["leaves"], timings["projections"], strict=True)
    ]
    print(
        f"  load+resolve median {statistics.median(resolve_only) * 1000:8.1f} ms, "
        f"min {min(resolve_only) * 1000:.1f} ms"
    )
    print(
        f"  all incl. YAML+digests of the leaves: median {statistics.median(totals) * 1000:.1f} ms"
    )


def _percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * len(ordered)) - 1))
    return ordered[index]


def bench_pages(requests: int = 200, recipes_total: int = 1000) -> None:
    import psycopg

    base_url, _, db_name = BENCH_DB.rpartition("/")
    with psycopg.connect(f"{base_url}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{db_name}"')
    try:
        _bench_pages(requests, recipes_total)
    finally:
        from django.db import connections

        connections.close_all()
        with psycopg.connect(f"{base_url}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')


def _bench_pages(requests: int, recipes_total: int) -> None:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from recipes_app.models import Catalog, Recipe

    call_command("migrate", verbosity=0)
    call_command("collectstatic", verbosity=0, interactive=False)
    call_command("import_catalog", verbosity=0, stdout=open(os.devnull, "w"))  # noqa: SIM115
    catalog = Catalog.objects.current()
    real = list(Recipe.objects.filter(catalog=catalog))
    synthetic = []
    for i in range(recipes_total - len(real)):
        template = real[i % len(real)]
        template.pk = None
        template.name = f"{template.leaf}-bench-{i}"
        synthetic.append(
            Recipe(
                **{
                    f.attname: getattr(template, f.attname)
                    for f in Recipe._meta.concrete_fields
                    if f.attname != "id"
                }
            )
        )
    Recipe.objects.bulk_create(synthetic, batch_size=200)
    print(
        f"\n## Pages (PostgreSQL, {Recipe.objects.filter(catalog=catalog).count()} recipes in "
        f"the current catalog, {requests} requests per URL, server time in-process)"
    )
    client = Client()
    filter_sets = [
        "",
        "?service=eks",
        "?accelerator=h100&intent=training",
        "?service=gke&os=cos",
        "?q=gpu-operator",
        "?intent=inference&platform=dynamo",
        "?service=eks&page=2",
    ]
    for path in ("/recipes/", "/api/v1/recipes/"):
        times: list[float] = []
        query_counts: set[int] = set()
        statuses: set[int] = set()
        client.get(path)  # warm caches
        for i in range(requests):
            url = path + filter_sets[i % len(filter_sets)]
            with CaptureQueriesContext(connection) as ctx:
                start = time.perf_counter()
                response = client.get(url)
                times.append(time.perf_counter() - start)
            query_counts.add(len(ctx.captured_queries))
            statuses.add(response.status_code)
        print(
            f"  {path:<18} p50 {_percentile(times, 50) * 1000:6.1f} ms  "
            f"p95 {_percentile(times, 95) * 1000:6.1f} ms  "
            f"SQL queries/request {sorted(query_counts)}  statuses {sorted(statuses)}"
        )


if __name__ == "__main__":
    bench_resolver()
    if os.environ.get("BENCH_SKIP_PAGES") != "1":
        bench_pages()
