"""End to end with real parts: Celery worker processes (``celery -A aicr_site worker -Q
validation``) against Redis and PostgreSQL run validation runs on simulated clusters.

* scenarios end as AICR's rules predict, and a finished run is published as simulated evidence;
* SIGKILL the worker mid-run: the reaper re-enqueues the run and a new worker resumes it at the
  check it was on (the in-flight Job is adopted by its deterministic name, not started twice);
  with no attempts left the run ends ``error`` saying why;
* cancel deletes the Job in flight and the run's objects and ends the run ``cancelled``, also
  while the worker is retrying against an API that keeps failing (the cancel wins);
* an API that keeps failing while a check waits makes that check ``other`` and the run goes
  on to its later checks (AICR's semantics), ending ``failed``;
* a finished run is never seen without its evidence or publish error (``publishing`` first);
* two concurrent starts on one cluster give one run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from aicr_site.celery import app as celery_app
from evidence_app.models import Evidence
from evidence_app.services import signers, trust_roots
from evidence_app.services.site_key import generate_pem
from tests.evidence_app.test_tasks_worker import (
    CELERY,
    REPO,
    _database_url,
    _redis_url,
    _reset_connections,
)
from tests.k8s_sim import SCENARIOS, ApiFaults, SimulatedCluster
from tests.k8s_sim.images import digest_of
from tests.validators_app.runs_support import RECIPE
from validators_app.models import PHASES, CheckStatus, Cluster, RunStatus, ValidationRun
from validators_app.orchestrator import RetryPolicy
from validators_app.services import clusters, runs

pytestmark = pytest.mark.django_db(transaction=True)
STALE_SECONDS = 3
FINISH_WITHIN_S = 120


@pytest.fixture
def broker() -> Iterator[str]:
    url = _redis_url()
    conf = celery_app.conf
    saved = (conf.broker_url, conf.task_always_eager)
    conf.broker_url, conf.task_always_eager = url, False
    _reset_connections()
    # A queue left over by an earlier test run must not feed these workers.
    with celery_app.connection_for_write() as conn:
        conn.default_channel.queue_purge("validation")
    yield url
    conf.broker_url, conf.task_always_eager = saved
    _reset_connections()


@pytest.fixture
def site(settings: Any, cluster_keys: list[str], real_catalog: Any) -> dict[str, str]:
    """Settings shared by this process and its workers (the workers read the environment)."""
    trust_roots.production_root_ensure()  # what migrations seed (flushed by earlier tests)
    signers.seeded_allowlist_ensure()
    pem = generate_pem().decode()
    settings.SITE_SIGNING_KEY = pem
    settings.SITE_SIGNING_LOCAL_KEY_FILE = None
    settings.VALIDATION_HEARTBEAT_STALE_SECONDS = STALE_SECONDS
    return {
        "CLUSTER_KUBECONFIG_KEY": ",".join(cluster_keys),
        "SITE_SIGNING_KEY": pem,
        "VALIDATION_HEARTBEAT_STALE_SECONDS": str(STALE_SECONDS),
        "VALIDATION_MAX_ATTEMPTS": "3",
    }


@pytest.fixture
def start_worker(broker: str, site: dict[str, str], tmp_path: Path) -> Iterator[Callable]:
    """``start_worker() -> Popen``: a worker process in its own process group."""
    database_url = _database_url()
    started: list[subprocess.Popen[bytes]] = []

    def start(name: str = "w") -> subprocess.Popen[bytes]:
        env = {
            **os.environ,
            **site,
            "DJANGO_SETTINGS_MODULE": "aicr_site.settings",
            "DATABASE_URL": database_url,
            "DB_CONN_MAX_AGE": "0",
            "REDIS_URL": broker,
        }
        command = [
            str(CELERY),
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
            f"{name}{len(started)}@%h",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "-l",
            "INFO",
        ]
        log = (tmp_path / f"{name}{len(started)}.log").open("wb")
        process = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=log, stderr=log, start_new_session=True
        )
        process.log_path = log.name  # type: ignore[attr-defined]
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)


def register(sim: SimulatedCluster, name: str) -> Cluster:
    return clusters.cluster_register(
        name=name, kubeconfig_text=sim.kubeconfig, environment="simulated"
    )


def wait_for(
    predicate: Callable[[], bool], what: str, timeout: float = FINISH_WITHIN_S, logs: Any = ()
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    tails = "\n".join(Path(p.log_path).read_text()[-3000:] for p in logs)
    raise AssertionError(f"timed out waiting for {what}\n{tails}")


def finished(run: ValidationRun) -> Callable[[], bool]:
    def check() -> bool:
        run.refresh_from_db()
        return not run.is_active  # publishing is not finished: its evidence is on the way

    return check


class Creations:
    """Jobs and pods the simulated cluster created, by Job name (from its store's events)."""

    def __init__(self, sim: SimulatedCluster) -> None:
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


def test_scenarios_on_a_real_worker_end_as_aicr_predicts_and_publish(
    start_worker: Callable, site: dict[str, str]
) -> None:
    worker = start_worker()
    cases = {
        "healthy-h100-eks": (None, RunStatus.PASSED),
        "gpu-operator-too-old": (["deployment"], RunStatus.FAILED),
        "readiness-old-kernel": (None, RunStatus.ERROR),
    }
    with (
        SimulatedCluster(SCENARIOS["healthy-h100-eks"]) as healthy,
        SimulatedCluster(SCENARIOS["gpu-operator-too-old"]) as too_old,
        SimulatedCluster(SCENARIOS["readiness-old-kernel"]) as old_kernel,
    ):
        started = {}
        for sim, name in (
            (healthy, "healthy-h100-eks"),
            (too_old, "gpu-operator-too-old"),
            (old_kernel, "readiness-old-kernel"),
        ):
            phases, _ = cases[name]
            run = runs.run_start(cluster=register(sim, name), recipe_name=RECIPE, phases=phases)
            started[name] = run
        for name, run in started.items():
            wait_for(finished(run), f"run {name} to finish", logs=[worker])
            assert run.status == cases[name][1], (name, run.error)
            assert run.attempts == 1
            # Seen the moment it is final: its evidence (or why there is none) is already there.
            if run.status != RunStatus.ERROR:
                assert run.evidence_id or run.publish_error, name
    passed = started["healthy-h100-eks"]
    assert passed.evidence is not None, passed.publish_error
    evidence = Evidence.objects.get(pk=passed.evidence_id)
    assert evidence.is_simulated
    assert evidence.verdict == "verified"
    # Every check and the agent recorded the digest the simulated registry served, and the
    # evidence lists it for each of the three validator images (all three phases ran).
    healthy_scenario = SCENARIOS["healthy-h100-eks"]
    checks = list(passed.checks.all())
    assert {c.image for c in checks} == {
        f"ghcr.io/nvidia/aicr-validators/{phase}:latest" for phase in PHASES
    }
    assert all(c.image_digest == digest_of(healthy_scenario, c.image) for c in checks)
    assert passed.agent_image_digest == digest_of(healthy_scenario, passed.agent_image)
    listed = evidence.predicate["validatorImages"]
    assert {i["image"]: i["digest"] for i in listed} == {c.image: c.image_digest for c in checks}
    assert started["gpu-operator-too-old"].evidence is not None
    error = started["readiness-old-kernel"]
    assert error.error.startswith("readiness check failed:")
    assert (error.ctrf, error.evidence) == (None, None)
    log = Path(worker.log_path).read_text()
    assert "validators_app.tasks.run_execute" in log


def test_a_killed_worker_is_replaced_and_the_run_resumes_at_its_check(
    start_worker: Callable, settings: Any
) -> None:
    # Slow enough (simulated seconds x 0.02 wall) to kill the worker between checks.
    scenario = replace(SCENARIOS["healthy-h100-eks"], time_scale=0.02, min_container_wall_s=0.5)
    first = start_worker("doomed")
    with SimulatedCluster(scenario) as sim:
        created = Creations(sim)
        run = runs.run_start(
            cluster=register(sim, "kill-me"), recipe_name=RECIPE, phases=["deployment"]
        )
        wait_for(
            lambda: (
                run.checks.filter(status=CheckStatus.PASSED).exists()
                and run.checks.filter(status=CheckStatus.RUNNING).exists()
            ),
            "a finished check and one in flight",
            logs=[first],
        )
        in_flight = run.checks.get(status=CheckStatus.RUNNING)
        done_before = set(
            run.checks.filter(status=CheckStatus.PASSED).values_list("name", flat=True)
        )
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=10)

        second = start_worker("rescuer")
        # The beat reaper's work, once the heartbeat is stale.
        time.sleep(STALE_SECONDS + 0.5)
        assert runs.runs_reap() == [run.pk]
        wait_for(finished(run), "the resumed run to finish", logs=[first, second])

        assert run.status == RunStatus.PASSED, run.error
        assert run.attempts == 2
        # The in-flight Job was adopted by its deterministic name, not created again; checks
        # the dead worker finished were not run again.
        # The in-flight check's Job is adopted (one Job, one pod), unless the kill fell in the
        # short window after its result was read and its Job deleted but before the result was
        # stored: then the resumed worker can only run it again (once).
        assert created.jobs[in_flight.job_name] in (1, 2)
        assert created.pods[in_flight.job_name] == created.jobs[in_flight.job_name]
        for name in done_before:
            job = run.checks.get(name=name).job_name
            assert (created.jobs[job], created.pods[job]) == (1, 1), name
        assert all(count == 1 for job, count in created.jobs.items() if job != "aicr-validate")
    stored = list(run.checks.order_by("position").values_list("name", "status"))
    assert all(status == CheckStatus.PASSED for _, status in stored)
    # The digests survive the takeover: the agent's (stored with the snapshot by the first
    # worker, which the second did not retake) and each check's, whichever worker read it.
    assert run.agent_image_digest == digest_of(scenario, run.agent_image)
    assert all(c.image_digest == digest_of(scenario, c.image) for c in run.checks.all())
    ctrf_names = [t["name"] for t in json.loads(bytes(run.ctrf))["results"]["tests"]]
    assert ctrf_names == [name for name, _ in stored]  # each check once, in order


def test_a_run_whose_workers_keep_dying_ends_in_error_with_the_reason(
    start_worker: Callable, settings: Any
) -> None:
    settings.VALIDATION_MAX_ATTEMPTS = 1
    scenario = replace(SCENARIOS["healthy-h100-eks"], time_scale=0.02, min_container_wall_s=0.5)
    worker = start_worker()
    with SimulatedCluster(scenario) as sim:
        run = runs.run_start(cluster=register(sim, "dies"), recipe_name=RECIPE)
        wait_for(
            lambda: run.checks.filter(status=CheckStatus.RUNNING).exists(),
            "a check in flight",
            logs=[worker],
        )
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)
        time.sleep(STALE_SECONDS + 0.5)
        assert runs.runs_reap() == []  # nothing to re-send: it gave up
    run.refresh_from_db()
    assert run.status == RunStatus.ERROR
    assert "the worker running this validation stopped during deployment/" in run.error
    assert "VALIDATION_MAX_ATTEMPTS=1" in run.error
    assert not run.checks.filter(status=CheckStatus.RUNNING).exists()


def test_cancel_deletes_the_job_in_flight_and_ends_cancelled(start_worker: Callable) -> None:
    scenario = replace(SCENARIOS["healthy-h100-eks"], time_scale=0.05, min_container_wall_s=1.0)
    worker = start_worker()
    with SimulatedCluster(scenario) as sim:
        run = runs.run_start(cluster=register(sim, "cancel-me"), recipe_name=RECIPE)
        wait_for(
            lambda: run.checks.filter(status=CheckStatus.RUNNING).exists(),
            "a check in flight",
            logs=[worker],
        )
        job = run.checks.get(status=CheckStatus.RUNNING).job_name
        runs.run_cancel(run=run)
        wait_for(finished(run), "the cancelled run to end", timeout=60, logs=[worker])
        assert run.status == RunStatus.CANCELLED, run.error
        assert run.ctrf is None
        assert run.evidence is None
        jobs = [o["metadata"]["name"] for o in sim.objects("Job", "aicr-validation")]
        assert job not in jobs
        accounts = [o["metadata"]["name"] for o in sim.objects("ServiceAccount", "aicr-validation")]
        assert f"aicr-validator-{run.aicr_run_id}" not in accounts
        assert any(
            method == "DELETE" and path.split("?")[0].endswith(f"/jobs/{job}")
            for method, path in sim.requests
        )


def _failing_job_gets(check: str) -> ApiFaults:
    """Every GET of ``check``'s Job (its read and watch while waiting) answers 503."""
    return ApiFaults(
        status=503, probability=1.0, path_contains=f"/jobs/aicr-{check}-", methods=("GET",)
    )


def _refused(sim: SimulatedCluster) -> int:
    return sum(1 for r in sim.request_log if r.status == 503)


def test_cancel_while_the_worker_retries_a_failing_api_ends_cancelled(
    start_worker: Callable,
) -> None:
    scenario = replace(
        SCENARIOS["healthy-h100-eks"], api_faults=_failing_job_gets("expected-resources")
    )
    worker = start_worker()
    with SimulatedCluster(scenario) as sim:
        run = runs.run_start(
            cluster=register(sim, "cancel-on-failures"), recipe_name=RECIPE, phases=["deployment"]
        )
        wait_for(lambda: _refused(sim) >= 2, "the worker retrying the Job's GET", logs=[worker])
        runs.run_cancel(run=run)
        wait_for(finished(run), "the cancelled run to end", timeout=60, logs=[worker])
        assert run.status == RunStatus.CANCELLED, run.error
        # The worker's retry policy allows 8 attempts; the cancel cut them short.
        assert _refused(sim) < RetryPolicy().attempts
        check = run.checks.get(name="expected-resources")
        assert (check.status, check.message) == (
            CheckStatus.OTHER,
            "the run ended (cancelled) before this check finished",
        )
        assert run.checks.get(name="operator-health").status == CheckStatus.PASSED
        assert list(run.checks.filter(status=CheckStatus.PENDING).values_list("name", flat=True))
        jobs = [o["metadata"]["name"] for o in sim.objects("Job", "aicr-validation")]
        assert check.job_name not in jobs
        assert (run.ctrf, run.evidence) == (None, None)


def test_a_check_whose_api_keeps_failing_is_other_and_the_later_checks_run(
    start_worker: Callable,
) -> None:
    # The check's container runs 40 s of wall time (deadline 8m = 48 s at 0.1): still running
    # when the worker's retries (about 16 s) give up, so HandleTimeout has no exit code.
    scenario = replace(
        SCENARIOS["healthy-h100-eks"],
        time_scale=0.1,
        check_seconds={"expected-resources": 400.0},
        api_faults=_failing_job_gets("expected-resources"),
    )
    worker = start_worker()
    with SimulatedCluster(scenario) as sim:
        run = runs.run_start(
            cluster=register(sim, "failing-check-api"), recipe_name=RECIPE, phases=["deployment"]
        )
        wait_for(finished(run), "the run to finish", logs=[worker])
    assert run.status == RunStatus.FAILED, run.error
    assert run.error == ""
    statuses = dict(run.checks.values_list("name", "status"))
    assert statuses == {
        "operator-health": CheckStatus.PASSED,
        "expected-resources": CheckStatus.OTHER,
        "gpu-operator-version": CheckStatus.PASSED,
        "check-nvidia-smi": CheckStatus.PASSED,
    }
    check = run.checks.get(name="expected-resources")
    assert check.message.startswith(
        f"validation failed: read job {check.job_name}: Kubernetes API still failing after "
        f"{RetryPolicy().attempts} attempt(s): HTTP 503"
    )
    tests = json.loads(bytes(run.ctrf))["results"]["tests"]
    assert [t["status"] for t in tests] == ["passed", "other", "passed", "passed"]
    assert run.evidence_id or run.publish_error  # published with its verdict


def test_two_concurrent_starts_on_one_cluster_give_one_run(
    broker: str, site: dict[str, str]
) -> None:
    _database_url()  # PostgreSQL: each thread has its own connection and transaction
    with SimulatedCluster(SCENARIOS["healthy-h100-eks"]) as sim:
        cluster = register(sim, "contended")
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def attempt() -> None:
        barrier.wait()
        try:
            runs.run_start(cluster=cluster, recipe_name=RECIPE)
            outcomes.append("started")
        except runs.RunStartError as exc:
            outcomes.append(exc.code)
        finally:
            connection.close()

    threads = [threading.Thread(target=attempt) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(outcomes) == ["conflict", "started"]
    assert ValidationRun.objects.filter(cluster=cluster).count() == 1
