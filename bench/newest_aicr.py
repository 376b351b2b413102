"""Issue 22: the staleness facts' newest AICR release per recipe, old query against new.

On a kept ``bench/scale.py`` data set (``BENCH_DATABASE_URL``, default ``aicr_bench_scale``;
build one with ``bench/scale.py --records 100000 --signers 10000 --keep``, migrated to this
branch): for the recipe names of the evidence list's first page (25 newest records) and for
every recipe name, the ``DISTINCT recipe_name, aicr_version`` over counted rows that
``staleness_context`` used to run, and ``services.staleness.newest_counted_releases`` (one
``LIMIT 1`` index probe per name on PostgreSQL). Both must name the same release per recipe;
prints the median and max of 7 calls of each (in process, with Django's overhead) and
``EXPLAIN (ANALYZE, BUFFERS)`` of both for the list page's names. Asserts only that agreement.
Run: ``.venv/bin/python bench/newest_aicr.py``
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/aicr_bench_scale")
os.environ["DATABASE_URL"] = os.environ["BENCH_DATABASE_URL"]
os.environ.setdefault("DEBUG", "1")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aicr_site.settings")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import django

django.setup()

from django.db import connection  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from evidence_app.corroborate.versions import compare  # noqa: E402
from evidence_app.models import Evidence  # noqa: E402
from evidence_app.services.staleness import newest_counted_releases  # noqa: E402
from evidence_app.services.versions import is_release  # noqa: E402


def old_query(names: list[str]) -> dict[str, str]:
    newest: dict[str, str] = {}
    for name, version in (
        Evidence.objects.counted()
        .filter(recipe_name__in=names)
        .order_by()
        .values_list("recipe_name", "aicr_version")
        .distinct()
    ):
        if is_release(version) and (name not in newest or compare(version, newest[name]) > 0):
            newest[name] = version
    return newest


def timed(call: Callable[[], object]) -> str:
    times = []
    for _ in range(7):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    times.sort()
    return f"median {times[3] * 1000:.1f} ms, max {times[-1] * 1000:.1f} ms"


def explain(sql: str, params: object) -> None:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
        for (line,) in cursor.fetchall():
            print("   ", line[:160])


def main() -> None:
    load = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout
    print(f"{Evidence.objects.count():,} evidence records; load: {load.strip()}")
    page = Evidence.objects.order_by("-attested_at", "-id").values_list("recipe_name", flat=True)
    listed = list(dict.fromkeys(page[:25]))
    every = sorted(set(Evidence.objects.order_by().values_list("recipe_name", flat=True)))
    for label, names in (("list page's names", listed), ("every name", every)):
        old, new = old_query(names), newest_counted_releases(names)
        assert old.keys() == new.keys(), (old, new)
        assert all(compare(old[n], new[n]) == 0 for n in old), (old, new)
        head = f"{label} ({len(names)}):"
        print(f"{head} DISTINCT {timed(lambda n=names: old_query(n))}")
        print(f"{head} probes   {timed(lambda n=names: newest_counted_releases(n))}")
    print("EXPLAIN, the DISTINCT:")
    distinct = (
        Evidence.objects.counted()
        .filter(recipe_name__in=listed)
        .order_by()
        .values_list("recipe_name", "aicr_version")
        .distinct()
    )
    explain(*distinct.query.sql_with_params())
    with CaptureQueriesContext(connection) as queries:
        newest_counted_releases(listed)
    print("EXPLAIN, the probes:")
    explain(queries.captured_queries[-1]["sql"], None)


if __name__ == "__main__":
    main()
