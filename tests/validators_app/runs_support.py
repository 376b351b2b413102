"""Helpers shared by the validation-run tests: clusters and finished outcomes."""

from __future__ import annotations

import itertools
from typing import Any

from tests.k8s_sim import SimulatedCluster
from validators_app import orchestrator
from validators_app.models import Cluster, Environment, ValidationRun
from validators_app.services import clusters, runs

RECIPE = "h100-eks-ubuntu-training-kubeflow"
_names = itertools.count()


def cluster_row(*, environment: str = Environment.SIMULATED, **fields: Any) -> Cluster:
    """A Cluster row for tests that never contact the cluster (no kubeconfig is decrypted)."""
    defaults: dict[str, Any] = {
        "name": f"cluster-{next(_names)}",
        "environment": environment,
        "server": "http://127.0.0.1:1",
        "kubeconfig_encrypted": "never decrypted in this test",
    }
    return Cluster.objects.create(**{**defaults, **fields})


def outcome(
    phase: str, name: str, status: str, *, exit_code: int | None = None, message: str = ""
) -> orchestrator.CheckOutcome:
    codes = {"passed": 0, "failed": 1, "skipped": 2, "other": -1}
    return orchestrator.CheckOutcome(
        phase=phase,
        name=name,
        status=status,
        exit_code=codes[status] if exit_code is None else exit_code,
        message=message,
        duration_ms=1000,
        stdout=('time=2026-12-01T00:00:00Z level=INFO msg="starting check"', "<b>log</b>"),
        extra={},
        job_name=f"aicr-{name}-00000000",
    )


def passed_outcome(run: ValidationRun) -> orchestrator.RunOutcome:
    """What the orchestrator returns for ``run`` (deployment phase only) when every check
    passed."""
    names = list(run.checks.values_list("name", flat=True))
    return orchestrator.RunOutcome(
        status="passed",
        error="",
        snapshot_yaml="kind: Snapshot\n",
        phase_reports={"deployment": b"{}\n"},
        merged_report=b'{"merged": true}\n',
        checks=tuple(outcome("deployment", n, "passed") for n in names),
    )


def run_on(
    scenario: Any, captures: Any, phases: list[str] | None = None
) -> tuple[ValidationRun, SimulatedCluster]:
    """Register ``scenario``'s simulated cluster and run ``RECIPE`` on it through the service,
    its task executed where ``captures`` (``django_capture_on_commit_callbacks``) runs it."""
    with SimulatedCluster(scenario) as sim:
        cluster = clusters.cluster_register(
            name=f"sim-{sim.url.rsplit(':', 1)[-1]}",
            kubeconfig_text=sim.kubeconfig,
            environment="simulated",
        )
        with captures(execute=True):
            run = runs.run_start(cluster=cluster, recipe_name=RECIPE, phases=phases)
        run.refresh_from_db()
        return run, sim


def publish_nothing(monkeypatch: Any) -> None:
    """Evidence is EVIDENCE's test: the publisher records no evidence, so ``run_publish``
    still takes a ``publishing`` run to its verdict (with neither evidence nor an error)."""
    monkeypatch.setattr("validators_app.services.evidence.publish_run", lambda run: None)
