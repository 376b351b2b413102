"""A run, started through the service, executed by the Celery task in-process (eager) with the
real orchestrator and the real ``kubernetes`` client against the simulated cluster: each
scenario ends with the status AICR's rules predict, and what is stored (checks, CTRF, error)
is what the orchestrator returned.

The same path with a separate worker process, Redis and PostgreSQL is
``test_runs_worker.py``.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from django.test import Client

from tests.k8s_sim import SCENARIOS
from tests.validators_app.runs_support import publish_nothing, run_on
from validators_app.models import CheckStatus, RunStatus

pytestmark = pytest.mark.django_db

# Scenario → (phases, run status, what the error says, checks that must not pass), by AICR's
# rules: readiness failures and an unreachable API end in error without CTRF; any failed or
# "other" check makes the run failed. Phases are cut to the one that shows the outcome, to keep
# the file fast; the healthy run does all three.
DEPLOYMENT = ["deployment"]
EXPECTED: dict[str, tuple[list[str] | None, str, str, tuple[str, ...]]] = {
    "healthy-h100-eks": (None, "passed", "", ()),
    "gpu-operator-missing": (DEPLOYMENT, "failed", "", ("operator-health",)),
    "gpu-operator-too-old": (DEPLOYMENT, "failed", "", ("gpu-operator-version",)),
    "no-gpu-nodes": (DEPLOYMENT, "failed", "", ("check-nvidia-smi",)),
    "dra-absent": (["conformance"], "failed", "", ("dra-support",)),
    "readiness-old-kernel": (None, "error", "readiness check failed:", ()),
    "readiness-old-kubernetes": (None, "error", "readiness check failed:", ()),
    "job-deadline-exceeded": (DEPLOYMENT, "failed", "", ("expected-resources",)),
    "image-never-pulled": (DEPLOYMENT, "failed", "", ("operator-health",)),
    "oom-killed": (DEPLOYMENT, "failed", "", ("expected-resources",)),
    "pod-evicted": (DEPLOYMENT, "failed", "", ("expected-resources",)),
    "node-lost": (DEPLOYMENT, "failed", "", ("expected-resources",)),
    "agent-fails": (None, "error", "snapshot agent Job aicr-validate failed (", ()),
    "unreachable": (DEPLOYMENT, "error", "", ()),
    "huge-logs": (DEPLOYMENT, "passed", "", ()),
    "watch-drops": (DEPLOYMENT, "passed", "", ()),
    "api-429": (DEPLOYMENT, "passed", "", ()),
    "runtime-docker-pullable": (DEPLOYMENT, "passed", "", ()),
    "runtime-config-id": (DEPLOYMENT, "passed", "", ()),
    # AICR 1.x's agent tolerates every taint by default; the opt-out and the private registry
    # need cluster settings (test_runs_worker_scheduling.py, test_orchestrator_scheduling.py).
    "gke-tainted-gpu-pool": (None, "passed", "", ()),
}


@pytest.fixture(autouse=True)
def _no_publishing(monkeypatch: pytest.MonkeyPatch) -> None:
    # Publishing is EVIDENCE's (tests/validators_app/test_run_evidence.py, and the worker test).
    publish_nothing(monkeypatch)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_scenario_ends_as_aicr_predicts(
    name: str, eager: None, real_catalog: Any, django_capture_on_commit_callbacks: Any
) -> None:
    phases, status, error, not_passed = EXPECTED[name]
    run, sim = run_on(SCENARIOS[name], django_capture_on_commit_callbacks, phases)

    assert run.status == status, (run.error, list(run.checks.values_list("name", "status")))
    assert run.attempts == 1
    assert run.finished_at is not None
    assert run.current_check == ""
    assert not run.checks.filter(status=CheckStatus.RUNNING).exists()
    if status == RunStatus.ERROR:
        assert run.error.startswith(error) if error else run.error
        assert run.ctrf is None
        assert run.phase_reports == {}
        return
    merged = json.loads(bytes(run.ctrf))
    tests = merged["results"]["tests"]
    stored = list(run.checks.order_by("position").values_list("name", "status"))
    assert [(t["name"], t["status"]) for t in tests] == stored  # CTRF order = execution order
    assert set(run.phase_reports) == set(run.phases)
    for check in not_passed:
        assert run.checks.get(name=check).status != CheckStatus.PASSED, check
    if status == RunStatus.PASSED:
        assert {s for _, s in stored} <= {CheckStatus.PASSED, CheckStatus.SKIPPED}
    assert run.snapshot_yaml.startswith(("kind: Snapshot", "apiVersion"))
    # The cluster is left as AICR leaves it: no per-run ServiceAccount or Job remains.
    names = [o["metadata"]["name"] for o in sim.objects("ServiceAccount", "aicr-validation")]
    assert f"aicr-validator-{run.aicr_run_id}" not in names


def test_the_page_and_the_api_of_a_hostile_log_run(
    eager: None, real_catalog: Any, django_capture_on_commit_callbacks: Any
) -> None:
    run, _ = run_on(SCENARIOS["huge-logs"], django_capture_on_commit_callbacks, ["deployment"])
    page = Client().get(f"/runs/{run.pk}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "<script" not in html.split("</header>", 1)[1]
    assert len(page.content) < 2_000_000
    ctrf = Client().get(f"/api/v1/runs/{run.pk}/ctrf.json")
    assert ctrf.status_code == 200
    assert b"<script" not in ctrf.content  # Go escapes < > & as \\u003c \\u003e \\u0026
    json.loads(ctrf.content)


@pytest.mark.parametrize(
    ("name", "exit_code", "message"),
    [
        ("pod-evicted", 137, "The container could not be located when the pod was terminated"),
        ("node-lost", -1, "failed (BackoffLimitExceeded): Job has reached the specified backoff"),
    ],
)
def test_a_disrupted_check_is_stored_as_other_and_the_page_says_why(
    name: str,
    exit_code: int,
    message: str,
    eager: None,
    real_catalog: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    run, _ = run_on(SCENARIOS[name], django_capture_on_commit_callbacks, DEPLOYMENT)
    check = run.checks.get(name="expected-resources")
    assert (check.status, check.exit_code) == (CheckStatus.OTHER, exit_code)
    assert message in check.message
    assert run.checks.get(name="check-nvidia-smi").status == CheckStatus.PASSED
    api = Client().get(f"/api/v1/runs/{run.pk}/").json()
    assert api["status"] == "failed"
    assert next(c for c in api["checks"] if c["name"] == "expected-resources")["status"] == "other"
    assert message in Client().get(f"/runs/{run.pk}/").content.decode()


def test_a_snapshot_agent_past_its_timeout_ends_the_run_as_error(
    eager: None,
    real_catalog: Any,
    django_capture_on_commit_callbacks: Any,
    settings: Any,
) -> None:
    settings.VALIDATION_SNAPSHOT_TIMEOUT_SECONDS = 1
    run, sim = run_on(SCENARIOS["agent-hangs"], django_capture_on_commit_callbacks)
    assert run.status == RunStatus.ERROR
    assert run.error == "snapshot agent Job aicr-validate did not complete within 1s"
    assert (run.ctrf, run.snapshot_yaml) == (None, "")
    assert not run.checks.exclude(status=CheckStatus.PENDING).exists()
    assert sim.objects("Job", "aicr-validation") == []
    page = Client().get(f"/runs/{run.pk}/").content.decode()
    assert "did not complete within 1s" in page


def test_a_snapshot_holding_nul_ends_the_run_as_error_saying_so(
    eager: None, real_catalog: Any, django_capture_on_commit_callbacks: Any
) -> None:
    """PostgreSQL text cannot hold NUL: the snapshot is refused before it is stored."""
    hostile = replace(SCENARIOS["healthy-h100-eks"], snapshot_text="kind: Snapshot\x00\n")
    run, _ = run_on(hostile, django_capture_on_commit_callbacks, DEPLOYMENT)
    assert run.status == RunStatus.ERROR
    assert run.error.startswith("snapshot is not valid YAML: unacceptable character #x0000")
    assert run.snapshot_yaml == ""
