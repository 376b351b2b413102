"""Multi-host figures: the compose services on their own test hosts (tests/deploy/: network
namespaces, loopback addresses, nginx from Debian with deploy/nginx.conf), production mode,
PostgreSQL and Redis on hosts of their own.

With two web hosts and two worker hosts behind nginx, then one of each (the same deployment,
the same data: nginx reloaded with one upstream server, the second worker host stopped while
idle): sustained evidence uploads per second (distinct signed bundles, 8 clients), page p95
(a mix of pages and API lists, 8 clients) and validation runs finished per minute (runs on
simulated clusters, one cluster each), on the demo data plus the uploads (a few hundred
records: rows copied in SQL to reach 10,000 lacked what ingest writes beside each record, and
pages answered 500 on them, so this bench does not fake a large table). Needs root
(namespaces). Prints figures; asserts nothing.

Run: ``.venv/bin/python bench/multihost.py [--uploads 40] [--gets 200] [--runs 4]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import signal
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

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
            if time.perf_counter() - started > 600:
                raise SystemExit(f"runs did not finish:\n{site.logs('worker')}")
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
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="aicr-bench-multihost-"))
    site = Deployment(tmp, bundles=2 * args.uploads)
    try:
        site.up()
        total = int(site.sql("SELECT count(*) FROM evidence_app_evidence")[0][0])
        rows: dict[str, dict[str, Any]] = {}
        for label, first in (("2 web + 2 worker hosts", 0), ("1 web + 1 worker host", 1)):
            if first:
                one_web_host(site)
                site.host("worker2").kill_all(signal.SIGKILL)  # idle: nothing it held is lost
            upload_rate, upload_statuses = uploads_per_second(
                site, list(range(first * args.uploads, (first + 1) * args.uploads))
            )
            p50, p95, page_statuses = page_p95(site, args.gets)
            rows[label] = {
                "uploads/s": upload_rate,
                "upload statuses": upload_statuses,
                "page p50 ms": p50 * 1000,
                "page p95 ms": p95 * 1000,
                "page statuses": page_statuses,
                "runs/min": runs_per_minute(site, args.runs, f"r{first}"),
            }
        print(
            f"\n[multihost] {platform.machine()}, {os.cpu_count()} CPUs (every host shares "
            f"them); {total:,} evidence records on PostgreSQL; {args.uploads} distinct uploads, "
            f"{args.gets} page GETs ({', '.join(PAGES)}), {CLIENTS} clients, through nginx; "
            f"{args.runs} runs (deployment phase, simulated clusters)"
        )
        for label, figures in rows.items():
            print(
                f"  {label}: {figures['uploads/s']:.1f} uploads/s {figures['upload statuses']}; "
                f"pages p50 {figures['page p50 ms']:.0f} ms, p95 {figures['page p95 ms']:.0f} ms "
                f"{figures['page statuses']}; {figures['runs/min']:.1f} runs/min"
            )
    finally:
        site.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
