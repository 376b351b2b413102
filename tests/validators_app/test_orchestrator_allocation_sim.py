"""The resolved GPU allocation policy and the NCCL runtime ref on a simulated cluster: the
orchestrator writes them into ``validation.yaml``, and ``dra-support``,
``secure-accelerator-access`` and ``inference-perf`` decide by them as AICR's validators do
(``validators/internal/allocmode``: configuration selects, the cluster verifies, a mismatch
fails closed). A contradictory configuration ends the run before any validator Job."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any

import pytest

from tests.k8s_sim import SCENARIOS, Scenario, SimulatedCluster
from tests.shared_data import BENCHMARK_RUNTIME_B200_ANY
from tests.validators_app.test_orchestrator_sim import FAST, RECIPE, TREE, Hooks, _api, _spec
from validators_app.orchestrator import CheckOutcome, RunOutcome, run_validation

MISMATCH_PLUGIN = (
    '[INVALID_REQUEST] GPU allocation policy mismatch: the recipe configures "device-plugin-'
    'extended-resource" but no Ready, schedulable node advertises allocatable nvidia.com/gpu.\n'
    "Observed state:\n"
)
MISMATCH_DRA = (
    '[INVALID_REQUEST] GPU allocation policy mismatch: the recipe configures "dra-resource-claim" '
    "but the cluster has no usable full-GPU DRA (gpu.nvidia.com DeviceClass + validated "
    "ResourceSlices).\nObserved state:\n"
)


def dra_opt_in(recipe: Mapping[str, Any] = RECIPE) -> dict[str, Any]:
    """The recipe with AICR's experimental DRA opt-in: all three values flipped together."""
    flipped = copy.deepcopy(dict(recipe))
    for ref in flipped["componentRefs"]:
        if ref["name"] == "nvidia-dra-driver-gpu":
            ref["overrides"] = {
                **(ref.get("overrides") or {}),
                "resources": {"gpus": {"enabled": True}},
                "gpuResourcesEnabledOverride": True,
            }
        elif ref["name"] == "gpu-operator":
            ref["overrides"] = {**(ref.get("overrides") or {}), "devicePlugin": {"enabled": False}}
    return flipped


def with_performance(recipe: Mapping[str, Any], checks: list[str], *constraints: dict) -> dict:
    changed = copy.deepcopy(dict(recipe))
    changed["validation"]["performance"] = {"checks": checks, "constraints": list(constraints)}
    return changed


def run(
    scenario: str | Scenario, recipe: Mapping[str, Any], phases: tuple[str, ...], **over: Any
) -> tuple[RunOutcome, SimulatedCluster, dict[str, CheckOutcome]]:
    chosen = SCENARIOS[scenario] if isinstance(scenario, str) else scenario
    chosen = dataclasses.replace(chosen, check_seconds={})  # 5 s simulated per check
    with SimulatedCluster(chosen) as cluster:
        spec = dataclasses.replace(_spec(phases=phases, **over), recipe=recipe)
        outcome = run_validation(_api(cluster), spec, Hooks(), retry=FAST)
    return outcome, cluster, {c.name: c for c in outcome.checks}


def log(check: CheckOutcome) -> str:
    return "\n".join(check.stdout)


def test_the_stock_policy_on_a_device_plugin_cluster_verifies_and_skips_the_dra_subtest() -> None:
    outcome, _, checks = run("healthy-h100-eks", RECIPE, ("conformance",))
    assert outcome.status == "passed", outcome.error
    dra = checks["dra-support"]
    assert "configured policy: device-plugin-extended-resource" in log(dra)
    assert (
        "skipped (not applicable): configured GPU allocation policy is "
        "device-plugin-extended-resource" in log(dra)
    )
    access = log(checks["secure-accelerator-access"])
    assert "mode exercised: device plugin (nvidia.com/gpu limits)" in access
    assert "Device plugin (nvidia.com/gpu):  usable=true" in access


def test_the_stock_policy_on_a_dra_mode_cluster_fails_closed_as_drift() -> None:
    outcome, _, checks = run("dra-mode-h100-eks", RECIPE, ("conformance",))
    assert outcome.status == "failed"
    for name in ("dra-support", "secure-accelerator-access"):
        check = checks[name]
        assert (check.status, check.exit_code) == ("failed", 1), name
        assert check.message.startswith(MISMATCH_PLUGIN), check.message
        assert "DRA (gpu.nvidia.com):              usable=true" in check.message
        assert "Likely cause: the cluster has drifted from the recipe (device plugin" in (
            check.message
        )


def test_the_dra_opt_in_on_a_dra_mode_cluster_exercises_dra() -> None:
    _, _, checks = run("dra-mode-h100-eks", dra_opt_in(), ("conformance",))
    dra, access = checks["dra-support"], checks["secure-accelerator-access"]
    assert (dra.status, access.status) == ("passed", "passed"), (dra.message, access.message)
    assert "configured policy: dra-resource-claim" in log(dra)
    assert "ResourceClaim gpu-claim allocated; pod gpu-alloc-test Succeeded" in log(dra)
    assert "mode exercised: DRA (gpu.nvidia.com ResourceClaim)" in log(access)
    # The device-plugin-only checks see no allocatable GPU there, as AICR's do.
    assert checks["gang-scheduling"].status == "failed"


def test_the_dra_opt_in_on_a_device_plugin_cluster_fails_closed() -> None:
    _, _, checks = run("healthy-h100-eks", dra_opt_in(), ("conformance",))
    for name in ("dra-support", "secure-accelerator-access"):
        assert checks[name].status == "failed", name
        assert checks[name].message.startswith(MISMATCH_DRA), checks[name].message


def test_a_dual_advertised_cluster_passes_the_configured_policy_with_a_warning() -> None:
    _, _, checks = run("dual-advertised-h100-eks", RECIPE, ("conformance",))
    dra = checks["dra-support"]
    assert dra.status == "passed"
    assert "WARNING: both mechanisms advertise GPUs on node(s) [" in log(dra)
    # The configured device-plugin policy forbids exercising DRA even where it is usable.
    assert "skipped (not applicable): configured GPU allocation policy is" in log(dra)


@pytest.mark.parametrize(
    ("scenario", "flip", "status", "expected"),
    [
        ("dra-mode-h100-eks", True, "passed", "worker GPU wiring: DRA (gpu.nvidia.com"),
        ("healthy-h100-eks", False, "passed", "worker GPU wiring: device plugin"),
        ("dra-mode-h100-eks", False, "failed", MISMATCH_PLUGIN),
    ],
)
def test_inference_perf_wires_its_workers_by_the_policy(
    scenario: str, flip: bool, status: str, expected: str
) -> None:
    recipe = with_performance(
        dra_opt_in() if flip else RECIPE,
        ["inference-perf"],
        {"name": "inference-throughput", "value": ">= 5000"},
    )
    _, _, checks = run(scenario, recipe, ("performance",))
    check = checks["inference-perf"]
    assert check.status == status, check.message
    assert expected in (check.message if status == "failed" else log(check))


def test_a_contradictory_allocation_configuration_errors_before_any_validator_job() -> None:
    broken = copy.deepcopy(dict(RECIPE))
    for ref in broken["componentRefs"]:
        if ref["name"] == "nvidia-dra-driver-gpu":  # gpus.enabled without the chart waiver
            ref["overrides"] = {"resources": {"gpus": {"enabled": True}}}
    outcome, cluster, _ = run("healthy-h100-eks", broken, ("deployment", "conformance"))
    assert outcome.status == "error"
    assert outcome.error == (
        "invalid GPU allocation configuration: nvidia-dra-driver-gpu resources.gpus.enabled=true "
        "requires gpuResourcesEnabledOverride=true — the upstream chart install guard rejects "
        "this combination; set both in the recipe overlay (issue #1327)"
    )
    assert (outcome.phase_reports, outcome.merged_report, outcome.checks) == ({}, None, ())
    assert outcome.snapshot_yaml  # as in AICR, the snapshot came first
    posted_jobs = [p for m, p in cluster.requests if m == "POST" and p.endswith("/jobs")]
    assert len(posted_jobs) == 1  # the snapshot agent's, no validator's
    assert not [p for _, p in cluster.requests if "aicr-validator-" in p]


RUNTIME_REF = {"name": "nccl-benchmark-runtime-ref", "value": "h100/mycloud"}
THRESHOLD = {"name": "nccl-all-reduce-bw", "value": ">= 300"}


def private_service(recipe: Mapping[str, Any] = RECIPE) -> dict[str, Any]:
    """A recipe for a service the performance validator's matrix does not know."""
    changed = copy.deepcopy(dict(recipe))
    changed["criteria"] = {**changed["criteria"], "service": "mycloud"}
    return changed


def test_a_runtime_ref_is_lowered_from_the_catalog_and_bypasses_the_matrix() -> None:
    runtime = BENCHMARK_RUNTIME_B200_ANY.read_text()
    files = {**TREE, "validators/performance/testdata/h100/mycloud/runtime.yaml": runtime}
    recipe = with_performance(
        private_service(), ["nccl-all-reduce-bw"], THRESHOLD, dict(RUNTIME_REF)
    )
    outcome, _, checks = run("healthy-h100-eks", recipe, ("performance",), catalog_files=files)
    check = checks["nccl-all-reduce-bw"]
    assert (outcome.status, check.status) == ("passed", "passed"), (outcome.error, check.message)
    assert "rendering the recipe-supplied benchmark runtime" in log(check)
    # Without the ref the same private service is outside the matrix: AICR's skip.
    plain = with_performance(private_service(), ["nccl-all-reduce-bw"], THRESHOLD)
    _, _, checks = run("healthy-h100-eks", plain, ("performance",), catalog_files=files)
    assert checks["nccl-all-reduce-bw"].message == (
        "[INTERNAL] skipped - requires Service + Accelerator to be implemented: skip"
    )


def test_a_runtime_that_is_no_training_runtime_fails_the_check_in_the_container() -> None:
    files = {
        **TREE,
        "validators/performance/testdata/h100/mycloud/runtime.yaml": "apiVersion: apps/v1\n"
        "kind: Deployment\n",
    }
    recipe = with_performance(
        private_service(), ["nccl-all-reduce-bw"], THRESHOLD, dict(RUNTIME_REF)
    )
    _, _, checks = run("healthy-h100-eks", recipe, ("performance",), catalog_files=files)
    assert checks["nccl-all-reduce-bw"].message == (
        "[INVALID_REQUEST] invalid nccl-benchmark-runtime: must be a trainer.kubeflow.org/v1alpha1 "
        'TrainingRuntime (got apiVersion="apps/v1" kind="Deployment")'
    )


def test_a_runtime_ref_the_catalog_cannot_resolve_errors_the_run_before_any_job() -> None:
    recipe = with_performance(
        private_service(), ["nccl-all-reduce-bw"], THRESHOLD, dict(RUNTIME_REF)
    )
    outcome, cluster, _ = run("healthy-h100-eks", recipe, ("performance",))
    assert outcome.status == "error"
    assert outcome.error.startswith(
        'failed to resolve nccl-benchmark-runtime-ref="h100/mycloud": expected '
        '"validators/performance/testdata/h100/mycloud/runtime.yaml" in the --data tree'
    )
    assert not [p for _, p in cluster.requests if "aicr-validator-" in p]


@pytest.mark.parametrize(
    ("profile", "status", "message"),
    [
        ("h100/eks", "passed", ""),
        (" H100 / EKS ", "passed", ""),
        (
            "gb200/eks",
            "skipped",
            "[INTERNAL] skipped - benchmark profile gb200/eks does not implement the default "
            "NCCL variant: skip",
        ),
        ("h100", "failed", '[INVALID_REQUEST] invalid nccl-benchmark-profile "h100": must be'),
        ("h100/oke", "failed", "available profiles: b200/any, gb200/any, gb200/eks, gb200/oke"),
    ],
)
def test_a_benchmark_profile_borrows_an_embedded_template(
    profile: str, status: str, message: str
) -> None:
    recipe = with_performance(
        private_service(),
        ["nccl-all-reduce-bw"],
        THRESHOLD,
        {"name": "nccl-benchmark-profile", "value": profile},
    )
    _, _, checks = run("healthy-h100-eks", recipe, ("performance",))
    check = checks["nccl-all-reduce-bw"]
    assert check.status == status, check.message
    assert message in check.message
