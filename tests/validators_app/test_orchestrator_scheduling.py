"""Scheduling and check-scoped inputs in the orchestrator's Jobs, as ``aicr validate`` renders
them (NVIDIA/aicr ``pkg/k8s/agent/job.go``, ``pkg/validator/v1/job_plan_internal.go`` buildEnv),
and runs on the simulated GKE-tainted and private-registry clusters ending as AICR predicts."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from tests.k8s_sim import SCENARIOS, SimulatedCluster
from tests.k8s_sim.scenarios import PRIVATE_REGISTRY
from tests.validators_app.test_orchestrator_sim import CATALOG, FAST, RECIPE, Hooks, _api, _spec
from validators_app.orchestrator import CheckInputs, RunOutcome, agent, run_validation
from validators_app.orchestrator.plan import (
    ImageSettings,
    Scheduling,
    catalog_entries,
    node_selector_env,
    render_job,
    tolerations_env,
)

RUN_ID = "20260819-101500-0123456789abcdef"
ENTRIES = {entry.name: entry for entry in catalog_entries(CATALOG)}
IMAGES = ImageSettings(version="v0.19.0")
FIXED = [
    "AICR_SNAPSHOT_PATH",
    "AICR_VALIDATION_PATH",
    "AICR_VALIDATOR_NAME",
    "AICR_VALIDATOR_PHASE",
    "AICR_RUN_ID",
    "AICR_NAMESPACE",
    "AICR_CHECK_TIMEOUT",
]
INPUTS = CheckInputs(
    hf_token="hf_secret_token_value",
    require_scoped_inference_gateway=True,
    nccl_fabric="roce",
    inference_perf_no_cleanup=True,
)


def job_for(check: str, scheduling: Scheduling | None = None) -> dict[str, Any]:
    return render_job(
        ENTRIES[check],
        run_id=RUN_ID,
        namespace="aicr-validation",
        recipe=RECIPE,
        images=IMAGES,
        scheduling=scheduling,
    )


def env_of(job: dict[str, Any]) -> list[tuple[str, str]]:
    (container,) = job["spec"]["template"]["spec"]["containers"]
    return [(e["name"], e.get("value", "<from>")) for e in container["env"]]


# --- AICR's serialisations ------------------------------------------------------------------


def test_the_node_selector_env_sorts_keys() -> None:
    assert node_selector_env({"zone": "us-west", "gpu": "true"}) == "gpu=true,zone=us-west"


@pytest.mark.parametrize(
    ("tolerations", "expected"),
    [
        ([{"operator": "Exists"}], "*"),
        ([{"key": "gpu-type", "operator": "Equal", "value": "h100", "effect": "NoSchedule"}],
         "gpu-type=h100:NoSchedule"),
        ([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
         "nvidia.com/gpu:NoSchedule"),
        ([{"operator": "Exists"}, {"key": "a", "operator": "Exists", "effect": "NoExecute",
           "tolerationSeconds": 30}], "*,a:NoExecute"),
    ],
)  # fmt: skip
def test_the_tolerations_env_is_serializetolerations_format(
    tolerations: list[dict[str, Any]], expected: str
) -> None:
    assert tolerations_env(tolerations) == expected


# --- validator Jobs -------------------------------------------------------------------------


def test_without_settings_the_job_is_aicrs_default() -> None:
    job = job_for("inference-perf")
    spec = job["spec"]["template"]["spec"]
    assert spec["imagePullSecrets"] == []
    assert spec["tolerations"] == [{"operator": "Exists"}]
    assert "nodeSelector" not in spec
    assert [name for name, _ in env_of(job)] == [*FIXED, "AICR_CLI_VERSION"]


def test_settings_reach_the_env_in_buildenv_order_and_the_pod_keeps_tolerate_all() -> None:
    scheduling = Scheduling(
        image_pull_secrets=("regcred", "mirror-creds"),
        node_selector={"nodepool": "gpu", "cloud.google.com/gke-accelerator": "nvidia-h100-80gb"},
        tolerations=({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},),
        check_inputs=INPUTS,
    )
    job = job_for("inference-perf", scheduling)
    spec = job["spec"]["template"]["spec"]
    assert spec["imagePullSecrets"] == [{"name": "regcred"}, {"name": "mirror-creds"}]
    # --node-selector / --toleration reach only the inner workloads.
    assert spec["tolerations"] == [{"operator": "Exists"}]
    assert "nodeSelector" not in spec
    assert env_of(job)[len(FIXED) :] == [
        ("AICR_NODE_SELECTOR", "cloud.google.com/gke-accelerator=nvidia-h100-80gb,nodepool=gpu"),
        ("AICR_TOLERATIONS", "nvidia.com/gpu:NoSchedule"),
        ("AICR_CLI_VERSION", "v0.19.0"),
        ("HF_TOKEN", "hf_secret_token_value"),
        ("AICR_INFERENCE_PERF_NO_CLEANUP", "1"),
    ]


@pytest.mark.parametrize(
    ("check", "forwarded"),
    [
        ("inference-perf", [("HF_TOKEN", "hf_secret_token_value"),
                            ("AICR_INFERENCE_PERF_NO_CLEANUP", "1")]),
        ("inference-gateway", [("AICR_REQUIRE_SCOPED_INFERENCE_GATEWAY", "true")]),
        ("nccl-all-reduce-bw-net", [("AICR_NCCL_FABRIC", "roce")]),
        ("nccl-all-reduce-bw", []),
        ("operator-health", []),
        ("dra-support", []),
    ],
)  # fmt: skip
def test_each_check_scoped_input_goes_only_to_its_check(
    check: str, forwarded: list[tuple[str, str]]
) -> None:
    job = job_for(check, Scheduling(check_inputs=INPUTS))
    after_version = env_of(job)[len(FIXED) + 1 :]  # past AICR_CLI_VERSION
    assert after_version == forwarded


def test_the_hf_token_is_not_in_the_specs_repr() -> None:
    spec = _spec(check_inputs=INPUTS)
    assert "hf_secret_token_value" not in repr(spec)
    assert "hf_secret_token_value" not in repr(Scheduling(check_inputs=INPUTS))


# --- the snapshot agent ---------------------------------------------------------------------


def test_the_agent_tolerates_every_taint_by_default_and_an_empty_list_opts_out() -> None:
    default = agent.job("aicr-validation", "img", {"nvidia.com/gpu.present": "true"})
    assert default["spec"]["template"]["spec"]["tolerations"] == [{"operator": "Exists"}]
    opted_out = agent.job("aicr-validation", "img", {}, tolerations=[])
    assert "tolerations" not in opted_out["spec"]["template"]["spec"]
    chosen = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    explicit = agent.job("aicr-validation", "img", {}, tolerations=chosen)
    assert explicit["spec"]["template"]["spec"]["tolerations"] == chosen


def test_the_agent_carries_the_pull_secrets() -> None:
    body = agent.job("aicr-validation", "img", {}, image_pull_secrets=("regcred",))
    assert body["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "regcred"}]
    assert (
        "imagePullSecrets"
        not in agent.job("aicr-validation", "img", {})["spec"]["template"]["spec"]
    )


# --- runs on the simulated clusters ---------------------------------------------------------


def run(scenario: str, **over: Any) -> tuple[RunOutcome, SimulatedCluster]:
    with SimulatedCluster(replace(SCENARIOS[scenario], check_seconds={})) as cluster:
        outcome = run_validation(
            _api(cluster), _spec(phases=("deployment",), **over), Hooks(), retry=FAST
        )
    return outcome, cluster


def agent_node_lists(cluster: SimulatedCluster) -> int:
    return sum(1 for r in cluster.request_log if r.method == "GET" and r.path == "/api/v1/nodes")


def test_a_gke_tainted_gpu_pool_passes_with_aicrs_default_agent() -> None:
    outcome, _ = run("gke-tainted-gpu-pool")
    assert (outcome.status, outcome.error) == ("passed", "")
    assert [c.status for c in outcome.checks] == ["passed"] * len(outcome.checks)


def test_an_agent_that_opts_out_of_tolerations_never_schedules_and_the_run_errors() -> None:
    outcome, cluster = run("gke-tainted-gpu-pool", agent_tolerations=(), snapshot_timeout_s=2)
    assert outcome.status == "error"
    assert outcome.error == "snapshot agent Job aicr-validate did not complete within 2s"
    assert outcome.merged_report is None
    assert outcome.checks == ()
    # The agent's objects went with it.
    assert not cluster.objects("Job", "aicr-validation")


def test_a_node_selector_replaces_the_gpu_default_for_the_agent() -> None:
    selector = {"cloud.google.com/gke-nodepool": "gpu-pool"}
    outcome, cluster = run("gke-tainted-gpu-pool", node_selector=selector)
    assert outcome.status == "passed"
    assert agent_node_lists(cluster) == 0  # no GPU-node lookup when a selector is given
    nowhere, _ = run(
        "gke-tainted-gpu-pool", node_selector={"pool": "missing"}, snapshot_timeout_s=2
    )
    assert nowhere.status == "error"


def test_a_private_registry_passes_with_its_pull_secret() -> None:
    outcome, _ = run(
        "private-registry",
        image_registry=PRIVATE_REGISTRY,
        agent_image=f"{PRIVATE_REGISTRY}/aicr:v0.19.0",
        image_pull_secrets=("regcred",),
    )
    assert (outcome.status, outcome.error) == ("passed", "")


def test_a_private_registry_without_the_secret_fails_each_check_with_the_pull_message() -> None:
    outcome, _ = run("private-registry", image_registry=PRIVATE_REGISTRY)
    assert outcome.status == "failed"
    image = f"{PRIVATE_REGISTRY}/aicr-validators/deployment:v0.19.0"
    for check in outcome.checks:
        assert check.status == "other"
        assert check.exit_code == -1
        assert check.message.startswith(f'ImagePullBackOff: Back-off pulling image "{image}"')


def test_a_private_agent_image_without_the_secret_ends_the_run_in_error() -> None:
    outcome, _ = run(
        "private-registry", agent_image=f"{PRIVATE_REGISTRY}/aicr:v0.19.0", snapshot_timeout_s=2
    )
    assert outcome.status == "error"
    assert outcome.error == "snapshot agent Job aicr-validate did not complete within 2s"
