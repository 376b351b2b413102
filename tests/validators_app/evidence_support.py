"""Finished validation runs for the run → evidence tests: realistic CTRF from the orchestrator's
own report builder, with hostile logs, messages and extras, and a snapshot with details that
must not leave the cluster."""

from __future__ import annotations

from datetime import UTC, datetime

import yaml

from recipes_app.models import Recipe
from tests.validators_app.runs_support import cluster_row
from validators_app import orchestrator
from validators_app.models import Environment, RunStatus, ValidationRun
from validators_app.orchestrator.ctrf import build_phase_report, to_bytes

PHASES = ("deployment", "conformance", "performance")
HOSTILE = "<script>alert('pwned')</script> token=s3cr3t-bearer ip-10-1-2-3.ec2.internal"
FORGED_EXTRA = {
    "nodesValidated": "2",
    "nodesTotal": "99999999",
    "skipReason": "<img src=x onerror=alert(1)>",
    "internalIP": "10.1.2.3",
}
SNAPSHOT = {
    "apiVersion": "aicr.run/v1alpha2",
    "kind": "Snapshot",
    "metadata": {
        "source-node": "ip-10-1-2-3.ec2.internal",
        "timestamp": "2026-12-01T00:00:00Z",
        "version": "v0.19.0",
    },
    "measurements": [
        {
            "type": "K8s",
            "subtypes": [
                {"subtype": "server", "data": {"version": "v1.33.5-eks-113cf36"}},
                {
                    "subtype": "node",
                    "data": {"provider": "aws", "hostname": "ip-10-1-2-3.ec2.internal"},
                },
                {"subtype": "helm", "data": {"gpu-operator.version": "v25.10.1"}},
            ],
        },
        {
            "type": "OS",
            "subtypes": [
                {"subtype": "release", "data": {"ID": "ubuntu", "VERSION_ID": "24.04"}},
                {"subtype": "sysctl", "data": {"/proc/sys/kernel/osrelease": "6.8.0-1015-aws"}},
            ],
        },
        {
            "type": "GPU",
            "subtypes": [
                {"subtype": "hardware", "data": {"model": "NVIDIA H100 80GB HBM3", "gpu-count": 8}}
            ],
        },
        {
            "type": "NodeTopology",
            "subtypes": [
                {"subtype": "summary", "data": {"node-count": 3}},
                {"subtype": "label", "data": {"nvidia.com/gpu.present": "true|gpu-1,gpu-2"}},
            ],
        },
    ],
}


def outcome(phase: str, name: str, status: str) -> orchestrator.CheckOutcome:
    codes = {"passed": 0, "failed": 1, "skipped": 2, "other": -1}
    return orchestrator.CheckOutcome(
        phase=phase,
        name=name,
        status=status,
        exit_code=codes[status],
        message="" if status == "passed" else f"[INTERNAL] {HOSTILE}",
        duration_ms=1234,
        stdout=("time=2026-12-01T00:00:01Z level=INFO msg=x", HOSTILE, "\ufffd\u2028"),
        extra=FORGED_EXTRA,
        job_name=f"aicr-{name}-00000000",
    )


def phase_reports(recipe: Recipe, *, failing: str = "") -> dict[str, bytes]:
    """phase → CTRF bytes as the orchestrator writes them, for the recipe's declared checks."""
    reports = {}
    for i, phase in enumerate(PHASES):
        names = [str(c["name"]) for c in recipe.checks.get(phase, [])]
        outcomes = [
            outcome(phase, name, "failed" if name == failing else "passed") for name in names
        ]
        start = 1_795_990_000_000 + i * 60_000
        report = build_phase_report(
            version="v0.19.0", outcomes=outcomes, start_ms=start, stop_ms=start + 30_000
        )
        reports[phase] = to_bytes(report)
    return reports


def finished_run(
    recipe: Recipe,
    *,
    status: str = RunStatus.PASSED,
    environment: str = Environment.REAL,
    failing: str = "",
    run_id: str = "20261201-000000-0123456789abcdef",
) -> ValidationRun:
    reports = phase_reports(recipe, failing=failing)
    return ValidationRun.objects.create(
        cluster=cluster_row(environment=environment, server="https://gpu.example:6443"),
        recipe=recipe,
        phases=list(PHASES),
        status=status,
        aicr_run_id=run_id,
        aicr_version="v0.19.0",
        snapshot_yaml=yaml.safe_dump(SNAPSHOT, sort_keys=False),
        phase_reports={phase: data.decode() for phase, data in reports.items()},
        finished_at=datetime(2026, 12, 1, 0, 30, tzinfo=UTC),
    )
