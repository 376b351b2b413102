"""Multi-host figures: the compose services on their own test hosts (tests/deploy/: network
namespaces, loopback addresses, nginx from Debian with deploy/nginx.conf), production mode,
PostgreSQL and Redis on hosts of their own.

With two web hosts and two worker hosts behind nginx, then one of each (the same deployment,
the same data: nginx reloaded with one upstream server, the second worker host stopped while
idle): sustained evidence uploads per second (distinct signed bundles, 8 clients), page p95
(a mix of pages and API lists, 8 clients) and validation runs finished per minute (runs on
simulated clusters, one cluster each).

The data: the demo seed plus the uploads, or with ``--records N`` N evidence records made by
bench/scale.py's builder (issue 22: real ingested bundles, signers classified as the product
does, each record with its upload log, the derived tables refreshed by the product's services),
built once on a scratch database (``BENCH_DATABASE_URL``, default ``aicr_bench_multihost`` on
127.0.0.1:5432), dumped with ``pg_dump -Fc`` (``--dump``, default
``.run/bench-multihost-N.dump``, reused when it exists) and restored into the deployment's
database before its ``migrate``, as an operator restores a backup. (Rows copied in SQL
without what ingest writes beside each record made pages answer 500: this bench uses the
builder, never such rows.) Needs root (namespaces). Prints figures; asserts nothing.

Run: ``.venv/bin/python bench/multihost.py [--records 100000] [--uploads 40] [--gets 200]
[--runs 4]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aicr_site.settings_test")

import django  # noqa: E402

django.setup()

from tests.deploy.deployment import Deployment  # noqa: E402
from tests.k8s_sim import SCENARIOS, SimulatedCluster  # noqa: E402
from tests.validators_app.runs_support import RECIPE  # noqa: E402

PAGES = ("/recipes/", "/evidence/", "/api/v1/evidence/", "/qualifications/", "/runs/")
CLIENTS = 8
RUNS_LIMIT_S = 300
# Compose runs each worker with --concurrency 2 (the test's hosts run 1 to know which host holds
# a task): at 100,000 records a publication rebuild holds one slot for minutes.
WORKER_CONCURRENCY = 2


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def build_dump(records: int, signers: int, dump: Path) -> None:
    """N records by bench/scale.py on a scratch database, dumped to ``dump``, the scratch
    database dropped."""
    import psycopg

    url = os.environ.get(
        "BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/aicr_bench_multihost"
    )
    started = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "scale.py"),
            "--records",
            str(records),
            "--signers",
            str(signers),
            "--keep",
            "--requests",
            "1",
            "--only",
            "/",
        ],
        env={**os.environ, "BENCH_DATABASE_URL": url},
        check=True,
    )
    built = time.perf_counter() - started
    dump.parent.mkdir(parents=True, exist_ok=True)
    pg_bin = Path(sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_dump"))[-1]).parent
    subprocess.run([str(pg_bin / "pg_dump"), "-Fc", "-Z", "1", "-f", str(dump), url], check=True)
    base, _, name = url.rpartition("/")
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    print(
        f"[multihost] {records:,} records built in {built:.0f} s and dumped "
        f"({dump.stat().st_size / 2**20:.0f} MiB); {load()}",
        flush=True,
    )


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def uploads_per_second(site: Deployment, indexes: list[int]) -> tuple[float, dict[int, int]]:
    started = time.perf_counter()
    pool = ThreadPoolExecutor(max_workers=CLIENTS)
    answers = list(pool.map(site.upload, indexes))
    pool.shutdown()
    wall = time.perf_counter() - started
    statuses: dict[int, int] = {}
    for answer in answers:
        statuses[answer.status] = statuses.get(answer.status, 0) + 1
    return len(indexes) / wall, statuses


def page_p95(site: Deployment, count: int) -> tuple[float, float, dict[int, int]]:
    pool = ThreadPoolExecutor(max_workers=CLIENTS)
    answers = list(pool.map(lambda i: site.request(PAGES[i % len(PAGES)]), range(count)))
    pool.shutdown()
    times = [a.seconds for a in answers]
    statuses: dict[int, int] = {}
    for answer in answers:
        statuses[answer.status] = statuses.get(answer.status, 0) + 1
    per_page = {
        page: pct([a.seconds for i, a in enumerate(answers) if i % len(PAGES) == n], 0.95)
        for n, page in enumerate(PAGES)
    }
    print(
        "  page p95 each: " + ", ".join(f"{p} {t * 1000:.0f} ms" for p, t in per_page.items()),
        flush=True,
    )
    return statistics.median(times), pct(times, 0.95), statuses


def runs_per_minute(site: Deployment, count: int, label: str) -> float:
    sim_host = site.host("sim")
    sims = [
        sim_host.call(
            lambda: SimulatedCluster(SCENARIOS["healthy-h100-eks"], host=sim_host.address).start()
        )
        for _ in range(count)
    ]
    ids = []
    try:
        clusters = []
        for n, sim in enumerate(sims):
            answer = site.api_json(
                "/api/v1/clusters/",
                {
                    "name": f"bench-{label}-{n}",
                    "kubeconfig": sim.kubeconfig,
                    "environment": "simulated",
                },
                site.tokens["maintainer"],
            )
            clusters.append(answer.json()["id"])
        started = time.perf_counter()
        for cluster in clusters:
            answer = site.api_json(
                "/api/v1/runs/",
                {"cluster": cluster, "recipe": RECIPE, "phases": ["deployment"]},
                site.tokens["maintainer"],
            )
            ids.append(answer.json()["id"])
        while True:
            rows = site.sql(
                "SELECT count(*) FROM validators_app_validationrun WHERE id = ANY(%s) "
                "AND status IN ('passed', 'failed', 'error', 'cancelled')",
                (ids,),
            )
            if rows[0][0] == len(ids):
                break
            if time.perf_counter() - started > RUNS_LIMIT_S:
                print(f"  runs: {rows[0][0]} of {len(ids)} finished in {RUNS_LIMIT_S} s")
                return rows[0][0] / (RUNS_LIMIT_S / 60)
            time.sleep(0.2)
        return len(ids) / ((time.perf_counter() - started) / 60)
    finally:
        for sim in sims:
            sim.stop()


def one_web_host(site: Deployment) -> None:
    nginx = site.tmp / "nginx"
    conf = (nginx / "site.conf").read_text()
    web2 = site.host("web2").address
    (nginx / "site.conf").write_text(
        "\n".join(line for line in conf.splitlines() if web2 not in line) + "\n"
    )
    os.kill(int((nginx / "nginx.pid").read_text()), signal.SIGHUP)
    time.sleep(2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--uploads", type=int, default=40)
    parser.add_argument("--gets", type=int, default=200)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--records", type=int, default=0, help="bench/scale.py's data set")
    parser.add_argument("--signers", type=int, default=10_000)
    parser.add_argument("--dump", type=Path, help="the data set's pg_dump (made if missing)")
    args = parser.parse_args()

    dump: Path | None = None
    if args.records:
        dump = args.dump or REPO / ".run" / f"bench-multihost-{args.records}.dump"
        if not dump.exists():
            build_dump(args.records, args.signers, dump)
    tmp = Path(tempfile.mkdtemp(prefix="aicr-bench-multihost-"))
    site = Deployment(tmp, bundles=2 * args.uploads, worker_concurrency=WORKER_CONCURRENCY)
    try:
        started = time.perf_counter()
        site.up(restore=dump)
        print(
            f"[multihost] deployment up in {time.perf_counter() - started:.0f} s"
            f"{' (the dump restored)' if dump else ''}; {load()}",
            flush=True,
        )
        total = int(site.sql("SELECT count(*) FROM evidence_app_evidence")[0][0])
        print(
            f"\n[multihost] {platform.machine()}, {os.cpu_count()} CPUs (every host shares "
            f"them); {total:,} evidence records on PostgreSQL; {args.uploads} distinct uploads, "
            f"{args.gets} page GETs ({', '.join(PAGES)}), {CLIENTS} clients, through nginx; "
            f"{args.runs} runs (deployment phase, simulated clusters); workers "
            f"--concurrency {WORKER_CONCURRENCY}",
            flush=True,
        )
        for label, first in (("2 web + 2 worker hosts", 0), ("1 web + 1 worker host", 1)):
            if first:
                one_web_host(site)
                # Whatever it held is delivered again (acks late); nothing here needs it.
                site.host("worker2").kill_all(signal.SIGKILL)
            before = load()
            upload_rate, upload_statuses = uploads_per_second(
                site, list(range(first * args.uploads, (first + 1) * args.uploads))
            )
            p50, p95, page_statuses = page_p95(site, args.gets)
            runs = runs_per_minute(site, args.runs, f"r{first}")
            print(
                f"  {label}: {upload_rate:.1f} uploads/s {upload_statuses}; pages p50 "
                f"{p50 * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms {page_statuses}; {runs:.1f} "
                f"runs/min\n    load before: {before}\n    load after:  {load()}",
                flush=True,
            )
        builds = site.sql(
            "SELECT include, round(build_seconds::numeric, 1), runs "
            "FROM evidence_app_publicationbuild ORDER BY include"
        )
        print(f"  publication builds stored (include, seconds, runs): {builds or 'none yet'}")
    finally:
        site.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
