"""Validation runs at scale: N runs on N simulated clusters, executed by W Celery worker
processes (Redis broker, PostgreSQL), each run the full `aicr validate` of a recipe (all three
phases) then published as signed simulated evidence.

Prints: total wall time from the first start to the last run finished (and published), runs per
minute, per-run time in queue and executing (median / p90 / max), and the checks that prove
nothing was lost or duplicated: every run finished exactly once (attempts == 1), every check of
every run ran in exactly one Job with one pod (the simulators' own object events), each CTRF
lists each check once, and every finished run has its evidence.

Needs PostgreSQL (`BENCH_DATABASE_URL`, default a scratch database `aicr_bench_runs` on
127.0.0.1:5432, created and dropped here) and Redis (`BENCH_REDIS_URL`, default
redis://127.0.0.1:6379/14, its `validation` queue purged). The simulated clusters run in this
process (one HTTP server thread each) with the scenario's default time scale (0.001: a 7 min
simulated NCCL check takes 0.42 s). Asserts nothing.
Run: ``.venv/bin/python bench/validation_runs.py [--runs 20] [--workers 2]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

BENCH_DB = os.environ.get(
    "BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/aicr_bench_runs"
)
BENCH_REDIS = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")
RECIPE = "h100-eks-ubuntu-training-kubeflow"


def _environment() -> dict[str, str]:
    from cryptography.fernet import Fernet
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    site_key = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return {
        "DJANGO_SETTINGS_MODULE": "aicr_site.settings",
        "DATABASE_URL": BENCH_DB,
        "DB_CONN_MAX_AGE": "0",
        "REDIS_URL": BENCH_REDIS,
        "DEBUG": "0",
        "SECRET_KEY": "bench-only-" + "k" * 50,
        "ALLOWED_HOSTS": "testserver",
        "SECURE_SSL_REDIRECT": "0",
        "LOG_LEVEL": "WARNING",
        "CLUSTER_KUBECONFIG_KEY": Fernet.generate_key().decode(),
        "SITE_SIGNING_KEY": site_key.decode(),
    }


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    os.environ.update(_environment())
    import psycopg

    base_url, _, db_name = BENCH_DB.rpartition("/")
    with psycopg.connect(f"{base_url}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{db_name}"')
    workers: list[subprocess.Popen[bytes]] = []
    logs = Path(tempfile.mkdtemp(prefix="bench-runs-"))
    try:
        setup()
        print(
            f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} "
            f"CPUs, PostgreSQL + Redis on loopback; {args.runs} runs on {args.runs} simulated "
            f"clusters, {args.workers} worker process(es) (-P solo)\n"
        )
        for i in range(args.workers):
            workers.append(start_worker(i, logs))
        bench(args.runs, workers, logs)
    finally:
        for process in workers:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
        from django.db import connections

        connections.close_all()
        with psycopg.connect(f"{base_url}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')


def setup() -> None:
    import io

    import django

    django.setup()
    from django.core.management import call_command

    from aicr_site.celery import app

    call_command("migrate", verbosity=0)
    call_command("import_catalog", verbosity=0, stdout=io.StringIO())
    with app.connection_for_write() as conn:
        conn.default_channel.queue_purge("validation")


def start_worker(index: int, logs: Path) -> subprocess.Popen[bytes]:
    celery = Path(sys.executable).with_name("celery")
    command = [
        str(celery),
        "-A",
        "aicr_site",
        "worker",
        "-Q",
        "validation",
        "-c",
        "1",
        "-P",
        "solo",
        "-n",
        f"bench{index}@%h",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
        "-l",
        "WARNING",
    ]
    log = (logs / f"worker{index}.log").open("wb")
    return subprocess.Popen(
        command, cwd=REPO, env=os.environ.copy(), stdout=log, stderr=log, start_new_session=True
    )


class Creations:
    """Jobs and pods one simulated cluster created, by Job name (its store's events)."""

    def __init__(self, sim: Any) -> None:
        self.jobs: dict[str, int] = {}
        self.pods: dict[str, int] = {}
        sim.store.subscribe(self._seen)

    def _seen(self, event: Any) -> None:
        if event.type != "ADDED":
            return
        meta = event.obj.get("metadata") or {}
        if event.resource.kind == "Job":
            self.jobs[meta.get("name", "")] = self.jobs.get(meta.get("name", ""), 0) + 1
        elif event.resource.kind == "Pod":
            job = (meta.get("labels") or {}).get("batch.kubernetes.io/job-name", "")
            self.pods[job] = self.pods.get(job, 0) + 1


def bench(n: int, workers: list[subprocess.Popen[bytes]], logs: Path) -> None:
    from contextlib import ExitStack

    from tests.k8s_sim import SCENARIOS, SimulatedCluster
    from validators_app.models import RunStatus, ValidationRun
    from validators_app.services import clusters, runs

    with ExitStack() as stack:
        sims = [
            stack.enter_context(SimulatedCluster(SCENARIOS["healthy-h100-eks"])) for _ in range(n)
        ]
        created = [Creations(sim) for sim in sims]
        registered = [
            clusters.cluster_register(
                name=f"bench-{i}", kubeconfig_text=sim.kubeconfig, environment="simulated"
            )
            for i, sim in enumerate(sims)
        ]
        time.sleep(2.0)  # let the workers finish booting (their start is not measured)
        t0 = time.perf_counter()
        started = [runs.run_start(cluster=c, recipe_name=RECIPE) for c in registered]
        ids = [run.pk for run in started]
        deadline = time.monotonic() + 30 * 60
        done_at: float | None = None
        while time.monotonic() < deadline:
            rows = ValidationRun.objects.filter(pk__in=ids)
            active = rows.filter(status__in=(RunStatus.QUEUED, RunStatus.RUNNING)).count()
            unpublished = rows.filter(
                status__in=(RunStatus.PASSED, RunStatus.FAILED), evidence=None, publish_error=""
            ).count()
            if active == 0 and unpublished == 0:
                done_at = time.perf_counter()
                break
            if any(w.poll() is not None for w in workers):
                print("  a worker exited; see", logs)
                break
            time.sleep(0.05)
        total = (done_at or time.perf_counter()) - t0

    rows = list(ValidationRun.objects.filter(pk__in=ids).prefetch_related("checks"))
    statuses: dict[str, int] = {}
    for run in rows:
        statuses[run.status] = statuses.get(run.status, 0) + 1
    queued = [(r.started_at - r.created_at).total_seconds() for r in rows if r.started_at]
    executing = [
        (r.finished_at - r.started_at).total_seconds()
        for r in rows
        if r.finished_at and r.started_at
    ]
    checks = sum(len(r.checks.all()) for r in rows)
    duplicated_jobs = sum(
        1
        for c in created
        for name, count in c.jobs.items()
        if name != "aicr-validate" and count != 1
    )
    duplicated_pods = sum(
        1
        for c in created
        for name, count in c.pods.items()
        if name != "aicr-validate" and count != 1
    )
    by_cluster = {c.pk: cr for c, cr in zip(registered, created, strict=True)}
    missing_pods = sum(
        1
        for r in rows
        for check in r.checks.all()
        if by_cluster[r.cluster_id].pods.get(check.job_name, 0) != 1
    )
    ctrf_dupes = 0
    for r in rows:
        if r.ctrf:
            names = [
                (t["suite"][0], t["name"]) for t in json.loads(bytes(r.ctrf))["results"]["tests"]
            ]
            ctrf_dupes += len(names) - len(set(names))
    published = sum(1 for r in rows if r.evidence_id)
    print(f"  total wall time, first start → last run finished and published: {total:.2f} s")
    print(
        f"  throughput: {len(rows) / total * 60:.1f} runs/min ({checks} checks, "
        f"{checks / total:.1f} checks/s)"
    )
    print(f"  statuses: {statuses}; attempts > 1: {sum(r.attempts > 1 for r in rows)}")
    if queued:
        print(
            f"  time in queue   median {statistics.median(queued):.2f} s, "
            f"p90 {pct(queued, 0.9):.2f} s, max {max(queued):.2f} s"
        )
    if executing:
        print(
            f"  time executing  median {statistics.median(executing):.2f} s, "
            f"p90 {pct(executing, 0.9):.2f} s, max {max(executing):.2f} s (incl. publishing: no)"
        )
    print(
        f"  lost: {n - len([r for r in rows if r.finished_at])} run(s) unfinished; "
        f"duplicated: {duplicated_jobs} Job name(s) created twice, {duplicated_pods} pod(s) "
        f"twice, {missing_pods} check(s) without exactly one pod, {ctrf_dupes} CTRF "
        f"duplicate(s); published as evidence: {published}/{len(rows)}"
    )
    errors = {
        r.pk: r.error[:200] or r.publish_error[:200] for r in rows if r.error or r.publish_error
    }
    if errors:
        print(f"  errors: {errors}")


if __name__ == "__main__":
    main()
