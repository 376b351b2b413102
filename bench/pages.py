"""Page budgets: server time and bytes of the pages a person opens first.

On a scratch PostgreSQL database with the bundled catalog and 10,000 evidence records
(bench/evidence.py's ``EvidenceMaker``: 300 signers, every third counted, per-check CTRF
results for each recipe's declared checks, 1 in 97 withdrawn) spread over every recipe, and
every stored consensus badge computed once: 100 requests of each page through Django's test
client (in process, so the time is the server's, no network), p50/p95 and SQL queries; then
the bytes of each page's HTML plus the CSS and JavaScript it loads, before compression.
Last, a recipe's history page (``/recipes/<name>/history/``) as it is, then with 10,000
records of that one recipe (``--history-records``): its newest page, a page deep in the past
(``?from=``) and an old cell's permalink (``?cell=``).

Run: ``.venv/bin/python bench/pages.py [--records 10000] [--requests 100] [--dump DIR]``
(``--dump`` writes each page's HTML into DIR, to see where its bytes are). Needs
PostgreSQL (``BENCH_DATABASE_URL``, default a scratch ``aicr_bench_pages`` on 127.0.0.1:5432,
created and dropped here). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import re
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/aicr_bench_pages")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import evidence as bench_evidence  # sets the scratch database up first

BUDGET = 100 * 1000  # bytes of HTML + CSS + JS per page, before compression
ASSET = re.compile(r'(?:href|src)="(/static/[^"]+\.(?:css|js))"')


def make_records(count: int) -> None:
    from django.db import connection

    from evidence_app.consensus import stored
    from evidence_app.models import Evidence
    from recipes_app.models import Catalog, Recipe

    recipes = list(Recipe.objects.filter(catalog=Catalog.objects.current()).order_by("name"))
    maker = bench_evidence.EvidenceMaker()
    signers = maker.signers(300, prefix="lab", counted_every=3)
    rng = random.Random(10)
    batch: list[Any] = []
    for i in range(count):
        recipe = recipes[i % len(recipes)]
        signer = signers[(i // len(recipes)) % len(signers)]
        batch.append(maker.evidence(recipe, signer, i // (len(recipes) * len(signers)), rng))
        if len(batch) == 2000:
            Evidence.objects.bulk_create(batch)
            batch = []
    if batch:
        Evidence.objects.bulk_create(batch)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE evidence_app_evidence")
    stored.consensus_refresh()


def asset_bytes(html: str) -> int:
    """The CSS and JavaScript files ``html`` loads from this site, as production serves them
    (``collectstatic``'s output: this site's own files minified, vendored ones as they come)."""
    from django.conf import settings

    return sum(
        (Path(settings.STATIC_ROOT) / url.removeprefix("/static/")).stat().st_size
        for url in sorted(set(ASSET.findall(html)))
    )


def bench_history(client: Any, requests: int, records: int) -> None:
    """The history page of one recipe as the bench made it, then with ``records`` of its own."""
    from evidence_app.models import Evidence
    from recipes_app.models import Recipe

    name = bench_evidence.GRID_RECIPE
    recipe = Recipe.objects.current().get(name=name)
    url = f"/recipes/{name}/history/"

    def measure(label: str, target: str) -> None:
        response = client.get(target)
        assert response.status_code == 200, (target, response.status_code)
        p50, p95, queries = bench_evidence._measure(
            f"GET {target}", lambda: client.get(target), requests
        )
        total = len(response.content) + asset_bytes(response.content.decode())
        verdict = "ok" if total < BUDGET else "OVER"
        print(
            f"  {label:<46} p50 {p50 * 1000:6.1f} ms p95 {p95 * 1000:6.1f} ms  "
            f"{len(response.content):>8,} {total:>9,}  {verdict}, SQL {queries}"
        )

    print(f"\n  history of {name}: {Evidence.objects.filter(recipe_name=name).count():,} records")
    measure("history page", url)
    maker = bench_evidence.EvidenceMaker()
    maker.serial = Evidence.objects.count()  # placeholder bytes stay unique
    signers = maker.signers(40, prefix="hist", counted_every=2)
    rng = random.Random(11)
    batch = [
        maker.evidence(recipe, signers[i % len(signers)], i // len(signers), rng)
        for i in range(records)
    ]
    Evidence.objects.bulk_create(batch, batch_size=2000)
    ids = list(
        Evidence.objects.filter(recipe_name=name)
        .order_by("attested_at", "pk")
        .values_list("pk", flat=True)
    )
    print(f"  history of {name}: {len(ids):,} records")
    measure("history page", url)
    middle = ids[-min(5000, len(ids) // 2)]
    measure("history page, ?from= a record deep in the past", f"{url}?from={middle}")
    measure("history page, ?cell= of the oldest record", f"{url}?cell=operator-health@{ids[0]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--dump", type=Path, help="write each page's HTML into this folder")
    parser.add_argument("--history-records", type=int, default=10_000)
    args = parser.parse_args()

    import psycopg

    base_url, _, db_name = bench_evidence.BENCH_DB.rpartition("/")
    with psycopg.connect(f"{base_url}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{db_name}"')
    try:
        bench_evidence.setup()
        from django.test import Client

        from evidence_app.models import Evidence

        start = time.perf_counter()
        make_records(args.records)
        print(
            f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs, "
            f"PostgreSQL on loopback, DEBUG=0, one thread; {Evidence.objects.count():,} evidence "
            f"records (made and badges stored in {time.perf_counter() - start:.0f} s)\n"
        )
        anonymous = Client()
        recipe = bench_evidence.GRID_RECIPE
        newest, older = Evidence.objects.filter(recipe_name=recipe).order_by("-attested_at", "-pk")[
            :2
        ]
        pages = {
            "/": "home (coverage matrix)",
            "/recipes/": "recipe list",
            "/recipes/?sort=state": "recipe list by state",
            "/recipes/?sort=attested": "recipe list by last attested",
            f"/recipes/{recipe}/": "a recipe page",
            f"/evidence/{newest.pk}/": "an evidence page",
            f"/evidence/compare/?a={older.pk}&b={newest.pk}": "compare two records",
            "/signers/": "signers",
            "/qualifications/": "qualifications table",
            "/qualifications/?sort=driver": "qualifications by driver",
            "/feeds/evidence.atom": "Atom feed",
            f"/badges/{recipe}.svg": "badge",
        }
        from django.db.models import Count

        from evidence_app.services.tokens import user_with_role

        maintainer = Client()
        maintainer.force_login(user_with_role(username="bench-maintainer", role="maintainer"))
        pages[f"/evidence/{newest.pk}/#maintainer"] = "an evidence page, for a maintainer"
        busiest = (
            Evidence.objects.values("signer__slug").annotate(n=Count("pk")).order_by("-n").first()
        )
        pages["/evidence/"] = "evidence list"
        pages[f"/signers/{busiest['signer__slug']}/"] = f"a signer ({busiest['n']} records)"
        pages["/runs/"] = "validation runs"
        pages["/check/"] = "check a cluster"
        pages["/evidence/new/#maintainer"] = "upload, for a maintainer"
        print(f"  {'page':<46} {'server time':>26}  {'HTML':>8} {'+CSS+JS':>9}  budget")
        for key, label in pages.items():
            url, _, who = key.partition("#")
            client = maintainer if who == "maintainer" else anonymous
            response = client.get(url)
            assert response.status_code == 200, (url, response.status_code)
            html = response.content.decode()
            if args.dump is not None:
                args.dump.mkdir(parents=True, exist_ok=True)
                name = re.sub(r"[^a-z0-9]+", "-", key.lower()).strip("-") or "home"
                (args.dump / f"{name}.html").write_text(html)
            p50, p95, _ = bench_evidence._measure(
                f"GET {url}", lambda u=url, c=client: c.get(u), args.requests
            )
            total = len(response.content) + asset_bytes(html)
            verdict = "ok" if total < BUDGET else "OVER"
            print(
                f"  {label:<46} p50 {p50 * 1000:6.1f} ms p95 {p95 * 1000:6.1f} ms  "
                f"{len(response.content):>8,} {total:>9,}  {verdict}"
            )
        bench_history(anonymous, args.requests, args.history_records)
    finally:
        from django.db import connections

        connections.close_all()
        with psycopg.connect(f"{base_url}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
