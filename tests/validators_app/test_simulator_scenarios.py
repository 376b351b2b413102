"""The simulator's scenarios decide what AICR's agent and validators would report.

The recipe is AICR's real ``h100-eks-ubuntu-training-kubeflow`` (resolved by our port of the
resolver from the shared recipe tree) and the ValidationInput is the one the orchestrator mounts,
so these verdicts are the ones a run against the simulator gets.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml

from recipes_app import resolver
from tests.k8s_sim import CATALOG_CHECKS, SCENARIOS, Scenario
from tests.k8s_sim.containers import run_agent, run_validator
from tests.k8s_sim.snapshot import build_snapshot
from validators_app.orchestrator import CatalogData, validation_document
from validators_app.orchestrator.plan import validation_input
from validators_app.orchestrator.readiness import check_readiness

CRITERIA = {
    "service": "eks",
    "accelerator": "h100",
    "os": "ubuntu",
    "intent": "training",
    "platform": "kubeflow",
}
STARTED = datetime(2026, 8, 19, 10, 15, 2, tzinfo=UTC)


@pytest.fixture(scope="module")
def recipe(real_tree_files: dict[str, str]) -> dict[str, Any]:
    catalog = resolver.load_catalog(real_tree_files)
    return resolver.resolve(catalog, CRITERIA, version="v0.19.0")


@pytest.fixture(scope="module")
def validation_yaml(recipe: Mapping[str, Any], real_tree_files: dict[str, str]) -> str:
    document = validation_document(recipe, CatalogData(real_tree_files))
    return yaml.safe_dump(document, sort_keys=False)


def declared(recipe: Mapping[str, Any]) -> list[tuple[str, str]]:
    validation = recipe["validation"]
    return [
        (phase, check)
        for phase in ("deployment", "conformance", "performance")
        for check in (validation.get(phase) or {}).get("checks") or []
    ]


def verdict(scenario: Scenario | str, check: str, phase: str, validation: str) -> tuple[int, str]:
    run = run_validator(
        SCENARIOS[scenario] if isinstance(scenario, str) else scenario,
        check=check,
        phase=phase,
        validation_yaml=validation,
        started=STARTED,
    )
    return run.exit_code, run.message


def test_the_healthy_snapshot_passes_the_real_recipes_readiness(recipe: dict[str, Any]) -> None:
    snapshot = build_snapshot(SCENARIOS["healthy-h100-eks"], agent_version="v0.19.0")
    names = [c["name"] for c in recipe["constraints"]]
    assert names == [
        "K8s.server.version",
        "OS.release.ID",
        "OS.release.VERSION_ID",
        "OS.sysctl./proc/sys/kernel/osrelease",
    ]
    assert check_readiness(recipe, snapshot) is None


@pytest.mark.parametrize(
    ("scenario", "message"),
    [
        (
            "readiness-old-kernel",
            "readiness check failed: OS.sysctl./proc/sys/kernel/osrelease expected >= 6.8, "
            "got 5.15.0-1051-aws",
        ),
        (
            "readiness-old-kubernetes",
            "readiness check failed: K8s.server.version expected >= 1.32.4, "
            "got v1.30.14-eks-931bdca",
        ),
    ],
)
def test_readiness_scenarios_fail_with_aicrs_message(
    recipe: dict[str, Any], scenario: str, message: str
) -> None:
    snapshot = build_snapshot(SCENARIOS[scenario], agent_version="v0.19.0")
    failure = check_readiness(recipe, snapshot)
    assert failure is not None
    assert failure.message == message


def test_the_agent_snapshot_describes_a_gpu_node_and_the_cluster() -> None:
    snapshot = build_snapshot(SCENARIOS["healthy-h100-eks"], agent_version="v0.19.0")
    by_type = {
        m["type"]: {s["subtype"]: s["data"] for s in m["subtypes"]}
        for m in snapshot["measurements"]
    }
    assert by_type["GPU"]["hardware"] == {
        "gpu-present": True,
        "gpu-count": 8,
        "driver-loaded": True,
        "detection-source": "pci",
        "model": "H100",
    }
    assert by_type["NodeTopology"]["summary"]["node-count"] == 3
    assert by_type["NodeTopology"]["label"]["nvidia.com/gpu.present"] == (
        "true|ip-10-0-12-34.ec2.internal,ip-10-0-56-78.ec2.internal"
    )
    assert by_type["K8s"]["image"]["gpu-operator"] == "v26.3.3"
    no_gpu = build_snapshot(SCENARIOS["no-gpu-nodes"], agent_version="v0.19.0")
    hardware = next(m for m in no_gpu["measurements"] if m["type"] == "GPU")["subtypes"][0]["data"]
    assert (hardware["gpu-present"], hardware["gpu-count"]) == (False, 0)
    log = run_agent(
        SCENARIOS["healthy-h100-eks"],
        started=STARTED,
        snapshot_target="cm://aicr-validation/aicr-snapshot",
    ).log.decode()
    assert "output=cm://aicr-validation/aicr-snapshot" in log.splitlines()[0]


def test_every_declared_check_passes_on_the_healthy_cluster(
    recipe: dict[str, Any], validation_yaml: str
) -> None:
    checks = declared(recipe)
    assert len(checks) == 15
    outcomes = {
        check: verdict("healthy-h100-eks", check, phase, validation_yaml) for phase, check in checks
    }
    assert outcomes == {check: (0, "") for _phase, check in checks}


@pytest.mark.parametrize(
    ("scenario", "phase", "check", "code", "message"),
    [
        (
            "gpu-operator-missing",
            "deployment",
            "operator-health",
            1,
            "[NOT_FOUND] no gpu-operator pods found",
        ),
        (
            "gpu-operator-missing",
            "deployment",
            "gpu-operator-version",
            1,
            "[NOT_FOUND] failed to detect GPU operator version",
        ),
        (
            "gpu-operator-missing",
            "deployment",
            "check-nvidia-smi",
            1,
            "[NOT_FOUND] recipe declares gpu-operator but the cluster has no GPU nodes to verify",
        ),
        (
            "gpu-operator-missing",
            "deployment",
            "expected-resources",
            1,
            "[NOT_FOUND] 1 expected resource(s) not healthy",
        ),
        (
            "gpu-operator-missing",
            "conformance",
            "accelerator-metrics",
            1,
            "[SERVICE_UNAVAILABLE] failed to reach http://nvidia-dcgm-exporter.gpu-operator.svc:9400",
        ),
        (
            "gpu-operator-too-old",
            "deployment",
            "gpu-operator-version",
            1,
            '[INTERNAL] GPU Operator version v23.9.2 does not satisfy constraint ">= v24.6.0"',
        ),
        (
            "no-gpu-nodes",
            "deployment",
            "check-nvidia-smi",
            1,
            "[NOT_FOUND] recipe declares gpu-operator but the cluster has no GPU nodes to verify",
        ),
        (
            "no-gpu-nodes",
            "performance",
            "nccl-all-reduce-bw",
            1,
            "[NOT_FOUND] recipe declares the nccl-all-reduce-bw NCCL benchmark but the cluster has "
            "fewer than 2 GPU nodes",
        ),
        (
            "dra-absent",
            "conformance",
            "dra-support",
            1,
            "[SERVICE_UNAVAILABLE] no served resource.k8s.io API version",
        ),
        (
            "healthy-h100-eks",
            "deployment",
            "gke-gpu-nic-networks",
            2,
            "[INTERNAL] gke-nccl-tcpxo not declared in recipe — GPU NIC networks are inapplicable: "
            "skip",
        ),
        ("healthy-h100-eks", "deployment", "no-such-check", 1, "unknown check: no-such-check"),
    ],
)
def test_scenarios_decide_the_verdict_as_aicrs_validator_would(
    validation_yaml: str, scenario: str, phase: str, check: str, code: int, message: str
) -> None:
    exit_code, text = verdict(scenario, check, phase, validation_yaml)
    assert exit_code == code
    assert text.startswith(message)


def test_the_nccl_floor_allows_aicrs_ten_percent_tolerance(validation_yaml: str) -> None:
    healthy = SCENARIOS["healthy-h100-eks"]
    at_floor = dataclasses.replace(healthy, nccl_busbw_gbps=270.0)  # 0.9 x 300
    below = dataclasses.replace(healthy, nccl_busbw_gbps=269.9)
    assert verdict(at_floor, "nccl-all-reduce-bw", "performance", validation_yaml) == (0, "")
    code, message = verdict(below, "nccl-all-reduce-bw", "performance", validation_yaml)
    assert (code, message) == (
        1,
        '[INTERNAL] NCCL bandwidth 269.90 GB/s does not satisfy constraint ">= 300"',
    )
    run = run_validator(
        healthy,
        check="nccl-all-reduce-bw",
        phase="performance",
        validation_yaml=validation_yaml,
        started=STARTED,
    )
    log = run.log.decode()
    assert "NCCL All Reduce bandwidth (nccl-all-reduce-bw): 456.84 GB/s" in log
    assert "Constraint: >= 300 → true" in log


def test_a_recipe_without_the_gpu_operator_skips_nvidia_smi_with_a_reason(
    recipe: dict[str, Any],
) -> None:
    without = dict(recipe)
    without["componentRefs"] = [r for r in recipe["componentRefs"] if r["name"] != "gpu-operator"]
    # A standalone ValidationInput (no policy): AICR's conversion refuses a recipe without an
    # advertiser, but the container's own rule is what is tested here.
    doc = yaml.safe_dump(validation_input(without, gpu_allocation_policy=""))
    run = run_validator(
        SCENARIOS["no-gpu-nodes"],
        check="check-nvidia-smi",
        phase="deployment",
        validation_yaml=doc,
        started=STARTED,
    )
    assert (run.exit_code, run.message) == (
        2,
        "[INTERNAL] no GPU nodes found in the cluster: skip",
    )
    assert run.log.decode().splitlines()[-1] == '##AICR-EXTRA## {"skipReason":"no-gpu-nodes"}'


def test_a_validator_without_a_readable_validation_input_fails_to_load_context() -> None:
    run = run_validator(
        SCENARIOS["healthy-h100-eks"],
        check="operator-health",
        phase="deployment",
        validation_yaml="config: [unclosed",
        started=STARTED,
    )
    assert run.exit_code == 1
    assert run.message.startswith("[INTERNAL] failed to load context")
    usage = run_validator(
        SCENARIOS["healthy-h100-eks"],
        check=None,
        phase="deployment",
        validation_yaml="",
        started=STARTED,
    )
    assert (usage.exit_code, usage.message) == (1, "usage: /deployment <check>")


def test_oom_kills_the_container_without_a_verdict(validation_yaml: str) -> None:
    run = run_validator(
        SCENARIOS["oom-killed"],
        check="expected-resources",
        phase="deployment",
        validation_yaml=validation_yaml,
        started=STARTED,
    )
    assert (run.exit_code, run.reason, run.message) == (137, "OOMKilled", "")


def test_huge_logs_are_megabytes_of_hostile_bytes(validation_yaml: str) -> None:
    run = run_validator(
        SCENARIOS["huge-logs"],
        check="operator-health",
        phase="deployment",
        validation_yaml=validation_yaml,
        started=STARTED,
    )
    assert run.exit_code == 0
    assert len(run.log) > 3 * 1024 * 1024
    with pytest.raises(UnicodeDecodeError):
        run.log.decode()
    lines = run.log.split(b"\n")
    assert b"<script>alert('xss')</script><img src=x onerror=alert(1)>" in lines
    forged = [line for line in lines if line.startswith(b"##AICR-EXTRA## ")]
    assert len(forged) == 6
    assert json.loads(forged[-1].removeprefix(b"##AICR-EXTRA## ")) == {
        "nodesValidated": "2",
        "nodesTotal": "2",
        "note": "<b>bold</b>\ud800",  # a lone surrogate escape: json.loads keeps it
    }
    assert b"a NUL \x00 byte in the last lines" in lines
    assert max(len(line) for line in lines) > 512


def test_every_catalog_check_has_an_answer(validation_yaml: str) -> None:
    """No catalog check crashes the simulated container; each exits 0, 1 or 2."""
    for phase, checks in CATALOG_CHECKS.items():
        for check in checks:
            code, _message = verdict("healthy-h100-eks", check, phase, validation_yaml)
            assert code in (0, 1, 2), check


def test_the_verdict_is_logged_in_slog_text_when_the_check_ends(validation_yaml: str) -> None:
    run = run_validator(
        SCENARIOS["gpu-operator-too-old"],
        check="gpu-operator-version",
        phase="deployment",
        validation_yaml=validation_yaml,
        started=STARTED,
    )
    first, *_middle, last = run.log.decode().splitlines()
    assert first == (
        'time=2026-08-19T10:15:02.037Z level=INFO msg="starting check" name=gpu-operator-version'
    )
    # 5 simulated seconds later, quoted like Go's strconv.Quote (non-ASCII kept as is).
    assert last == (
        'time=2026-08-19T10:15:06.837Z level=ERROR msg=FAIL message="[INTERNAL] GPU Operator '
        'version v23.9.2 does not satisfy constraint \\">= v24.6.0\\""'
    )
    assert run.sim_seconds == 5.0


def test_the_healthy_snapshot_fingerprints_as_the_recipes_eks_h100_ubuntu_cluster() -> None:
    """Evidence from a simulated run carries a fingerprint that meets the recipe's criteria."""
    from evidence_app.attestation import criteria_match, fingerprint_of

    snapshot = build_snapshot(SCENARIOS["healthy-h100-eks"], agent_version="v0.19.0")
    fingerprint = fingerprint_of(snapshot)
    assert (fingerprint["service"]["value"], fingerprint["accelerator"]["value"]) == ("eks", "h100")
    assert (fingerprint["nodeCount"]["value"], fingerprint["gpuNodeCount"]["value"]) == (3, 2)
    assert criteria_match(CRITERIA, fingerprint)["matched"] is True


def test_a_hanging_or_killed_check_has_logged_no_verdict(validation_yaml: str) -> None:
    hung = run_validator(
        SCENARIOS["job-deadline-exceeded"],
        check="expected-resources",
        phase="deployment",
        validation_yaml=validation_yaml,
        started=STARTED,
    )
    assert hung.hang
    log = hung.log.decode()
    assert "starting check" in log
    assert "All deployment resources" in log  # what it printed so far
    assert "msg=FAIL" not in log
    assert "msg=SKIP" not in log
    assert log.splitlines()[-1].endswith(
        'msg="waiting for the check to converge" name=expected-resources'
    )
    oom = dataclasses.replace(SCENARIOS["oom-killed"], oom_checks=("check-nvidia-smi",))
    killed = run_validator(
        oom,
        check="check-nvidia-smi",
        phase="deployment",
        validation_yaml=validation_yaml,
        started=STARTED,
    )
    assert "##AICR-EXTRA##" not in killed.log.decode()
    assert "Successfully verified" not in killed.log.decode()
