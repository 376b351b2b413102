"""The simulated cluster schedules and pulls as Kubernetes does: taints and tolerations
(NoSchedule/NoExecute), nodeSelector, the scheduler's FailedScheduling message, and a private
registry that needs a named pull Secret (ErrImagePull, then ImagePullBackOff). Checked with the
real ``kubernetes`` client and with kubectl.

The Jobs are the orchestrator's own (``agent.job``, ``plan.render_job``), so what is checked here
is how AICR's objects fare on such clusters.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml
from kubernetes import client, watch

from tests.k8s_sim import SCENARIOS, SimulatedCluster
from tests.k8s_sim.kubelet import tolerates
from tests.k8s_sim.scenarios import GKE_GPU_TAINT, PRIVATE_REGISTRY
from tests.validators_app.kubectl import HAS_KUBECTL, kubectl_for
from validators_app.orchestrator import agent

NS = "aicr-validation"
GPU_SELECTOR = {"nvidia.com/gpu.present": "true"}
TAINTED_REFUSAL = (
    "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 2 node(s) "
    "had untolerated taint {nvidia.com/gpu: present}. preemption: 0/3 nodes are available: 3 "
    "Preemption is not helpful for scheduling."
)


def api_for(cluster: SimulatedCluster) -> kubernetes.client.ApiClient:
    return kubernetes.config.new_client_from_config_dict(yaml.safe_load(cluster.kubeconfig))


def prepare(api: kubernetes.client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    if NS not in [ns.metadata.name for ns in core.list_namespace().items]:
        core.create_namespace({"metadata": {"name": NS}})
    core.create_namespaced_service_account(NS, agent.service_account(NS))


def wait_until(probe: Callable[[], Any], what: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if result := probe():
            return result
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def agent_pod(api: kubernetes.client.ApiClient) -> client.V1Pod:
    core = client.CoreV1Api(api)

    def listed() -> client.V1Pod | None:
        pods = core.list_namespaced_pod(
            NS, label_selector=f"batch.kubernetes.io/job-name={agent.AGENT_JOB}"
        ).items
        return pods[0] if pods else None

    return wait_until(listed, "the agent's pod")


def events_of(api: kubernetes.client.ApiClient, pod: str) -> list[client.CoreV1Event]:
    return [
        event
        for event in client.CoreV1Api(api).list_namespaced_event(NS).items
        if event.involved_object.name == pod
    ]


def job_done(api: kubernetes.client.ApiClient, name: str) -> client.V1Job | None:
    job = client.BatchV1Api(api).read_namespaced_job(name, NS)
    # A Job just created has no status until the Job controller has seen it.
    listed = (job.status.conditions if job.status else None) or ()
    conditions = {c.type for c in listed if c.status == "True"}
    return job if conditions & {"Complete", "Failed"} else None


@pytest.fixture
def gke() -> Iterator[SimulatedCluster]:
    with SimulatedCluster(SCENARIOS["gke-tainted-gpu-pool"]) as cluster:
        prepare(api_for(cluster))
        yield cluster


def test_an_agent_that_tolerates_nothing_stays_pending_with_the_schedulers_message(
    gke: SimulatedCluster,
) -> None:
    api = api_for(gke)
    body = agent.job(NS, "ghcr.io/nvidia/aicr:v0.19.0", GPU_SELECTOR, tolerations=[])
    assert "tolerations" not in body["spec"]["template"]["spec"]
    client.BatchV1Api(api).create_namespaced_job(NS, body)
    pod = agent_pod(api)
    assert pod.status.phase == "Pending"
    assert pod.spec.node_name is None
    (condition,) = pod.status.conditions
    assert (condition.type, condition.status, condition.reason) == (
        "PodScheduled",
        "False",
        "Unschedulable",
    )
    assert condition.message == TAINTED_REFUSAL
    # The scheduler records its event after it wrote the pod's condition, as a real
    # kube-scheduler does, so a client that saw the condition may list no event yet.
    (event,) = wait_until(lambda: events_of(api, pod.metadata.name), "the scheduler's event")
    assert (event.type, event.reason, event.source.component) == (
        "Warning",
        "FailedScheduling",
        "default-scheduler",
    )
    assert event.message == TAINTED_REFUSAL
    time.sleep(0.2)  # nothing changes: no node will ever tolerate nothing
    assert job_done(api, agent.AGENT_JOB) is None
    assert client.CoreV1Api(api).read_namespaced_pod(pod.metadata.name, NS).spec.node_name is None


def test_aicrs_default_agent_tolerates_the_gpu_taint_and_completes(gke: SimulatedCluster) -> None:
    api = api_for(gke)
    body = agent.job(NS, "ghcr.io/nvidia/aicr:v0.19.0", GPU_SELECTOR)  # tolerations=None
    assert body["spec"]["template"]["spec"]["tolerations"] == [{"operator": "Exists"}]
    client.BatchV1Api(api).create_namespaced_job(NS, body)
    pod = agent_pod(api)
    assert pod.spec.node_name.startswith("gke-aicr-gpu-pool-")
    job = wait_until(lambda: job_done(api, agent.AGENT_JOB), "the agent Job")
    assert "Complete" in [c.type for c in job.status.conditions if c.status == "True"]
    assert not [e for e in events_of(api, pod.metadata.name) if e.reason == "FailedScheduling"]


@pytest.mark.parametrize(
    ("tolerations", "node"),
    [
        # The exact taint, Equal: the GPU pool is open.
        (
            [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present",
              "effect": "NoSchedule"}],
            "gke-aicr-gpu-pool-",
        ),
        # Exists on the key, any effect.
        ([{"key": "nvidia.com/gpu", "operator": "Exists"}], "gke-aicr-gpu-pool-"),
        # A wrong value or another effect does not tolerate the taint.
        ([{"key": "nvidia.com/gpu", "operator": "Equal", "value": "absent"}], None),
        ([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}], None),
    ],
)  # fmt: skip
def test_tolerations_match_taints_as_kubernetes_matches_them(
    gke: SimulatedCluster, tolerations: list[dict[str, str]], node: str | None
) -> None:
    api = api_for(gke)
    body = agent.job(NS, "ghcr.io/nvidia/aicr:v0.19.0", GPU_SELECTOR, tolerations=tolerations)
    client.BatchV1Api(api).create_namespaced_job(NS, body)
    pod = agent_pod(api)
    if node is None:
        assert pod.spec.node_name is None
        assert pod.status.conditions[0].message == TAINTED_REFUSAL
    else:
        assert pod.spec.node_name.startswith(node)


def test_a_node_selector_picks_the_matching_untainted_node(gke: SimulatedCluster) -> None:
    api = api_for(gke)
    selector = {"cloud.google.com/gke-nodepool": "default-pool"}
    client.BatchV1Api(api).create_namespaced_job(
        NS, agent.job(NS, "ghcr.io/nvidia/aicr:v0.19.0", selector, tolerations=[])
    )
    assert agent_pod(api).spec.node_name == "gke-aicr-default-pool-8e4f0b1c-z9rt"


def test_a_selector_nothing_matches_counts_every_node() -> None:
    with SimulatedCluster(SCENARIOS["healthy-h100-eks"]) as cluster:
        api = api_for(cluster)
        prepare(api)
        client.BatchV1Api(api).create_namespaced_job(
            NS, agent.job(NS, "ghcr.io/nvidia/aicr:v0.19.0", {"pool": "none"})
        )
        assert agent_pod(api).status.conditions[0].message == (
            "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. "
            "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
        )


def test_toleration_matching_rules() -> None:
    taint = dict(GKE_GPU_TAINT)
    assert tolerates([{"operator": "Exists"}], taint)
    assert tolerates([{"key": "nvidia.com/gpu", "value": "present"}], taint)  # Equal by default
    exists_no_schedule = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    assert tolerates([exists_no_schedule], taint)
    assert not tolerates([], taint)
    assert not tolerates([{"operator": "Equal"}], taint)  # an empty key needs Exists
    assert not tolerates([{"key": "other", "operator": "Exists"}], taint)
    assert not tolerates([{"operator": "Exists", "effect": "PreferNoSchedule"}], taint)


# --- a private registry ----------------------------------------------------------------------


@pytest.fixture
def private() -> Iterator[SimulatedCluster]:
    with SimulatedCluster(SCENARIOS["private-registry"]) as cluster:
        prepare(api_for(cluster))
        yield cluster


def private_agent(secrets: tuple[str, ...]) -> dict[str, Any]:
    return agent.job(
        NS, f"{PRIVATE_REGISTRY}/aicr:v0.19.0", GPU_SELECTOR, image_pull_secrets=secrets
    )


def pull_states(api: kubernetes.client.ApiClient, since: str) -> list[tuple[str, str]]:
    """(reason, message) of the agent container's waiting states, in the order the pod went
    through them (a watch from the Job's creation), until ImagePullBackOff."""
    states: list[tuple[str, str]] = []
    stream = watch.Watch().stream(
        client.CoreV1Api(api).list_namespaced_pod,
        NS,
        label_selector=f"batch.kubernetes.io/job-name={agent.AGENT_JOB}",
        resource_version=since,
        timeout_seconds=30,
    )
    for event in stream:
        for status in event["object"].status.container_statuses or ():
            waiting = status.state.waiting
            if waiting and (not states or states[-1][0] != waiting.reason):
                states.append((waiting.reason, waiting.message or ""))
        if states and states[-1][0] == "ImagePullBackOff":
            break
    return states


def test_the_registry_secret_is_seeded_where_a_maintainer_creates_it(
    private: SimulatedCluster,
) -> None:
    (secret,) = client.CoreV1Api(api_for(private)).list_namespaced_secret(NS).items
    assert (secret.metadata.name, secret.type) == ("regcred", "kubernetes.io/dockerconfigjson")


def test_a_private_image_without_the_secret_fails_to_pull_then_backs_off(
    private: SimulatedCluster,
) -> None:
    api = api_for(private)
    job = client.BatchV1Api(api).create_namespaced_job(NS, private_agent(()))
    states = pull_states(api, job.metadata.resource_version)
    pod = agent_pod(api)
    image = f"{PRIVATE_REGISTRY}/aicr:v0.19.0"
    assert [reason for reason, _ in states] == [
        "ContainerCreating",
        "ErrImagePull",
        "ImagePullBackOff",
    ]
    assert states[1][1].startswith(f'failed to pull and unpack image "{image}"')
    assert "authorization failed" in states[1][1]
    assert states[2][1].startswith(f'Back-off pulling image "{image}": ErrImagePull: ')
    messages = [(e.type, e.reason, e.message) for e in events_of(api, pod.metadata.name)]
    assert ("Normal", "Pulling", f'Pulling image "{image}"') in messages
    assert ("Warning", "Failed", "Error: ErrImagePull") in messages
    assert ("Warning", "Failed", "Error: ImagePullBackOff") in messages
    assert any(m.startswith(f'Failed to pull image "{image}": ') for _, _, m in messages)
    assert job_done(api, agent.AGENT_JOB) is None  # the pull never succeeds


def test_a_secret_that_does_not_exist_is_reported_and_does_not_help(
    private: SimulatedCluster,
) -> None:
    api = api_for(private)
    job = client.BatchV1Api(api).create_namespaced_job(NS, private_agent(("missing",)))
    assert pull_states(api, job.metadata.resource_version)[-1][0] == "ImagePullBackOff"
    pod = agent_pod(api)
    reasons = {e.reason: e.message for e in events_of(api, pod.metadata.name)}
    assert reasons["FailedToRetrieveImagePullSecret"] == (
        "Unable to retrieve some image pull secrets (missing); attempting to pull the image "
        "may not succeed."
    )


def test_the_named_secret_pulls_the_private_image(private: SimulatedCluster) -> None:
    api = api_for(private)
    client.BatchV1Api(api).create_namespaced_job(NS, private_agent(("regcred",)))
    job = wait_until(lambda: job_done(api, agent.AGENT_JOB), "the agent Job")
    assert "Complete" in [c.type for c in job.status.conditions if c.status == "True"]


@pytest.mark.skipif(not HAS_KUBECTL, reason="kubectl is not installed")
def test_kubectl_sees_the_same_scheduling_and_pull_failures(tmp_path: Path) -> None:
    """client-go (kubectl) reads the pods, events and secrets the python client reads."""
    scenario = SCENARIOS["gke-tainted-gpu-pool"]
    with SimulatedCluster(scenario, tls=True) as cluster:
        api = api_for(cluster)
        prepare(api)
        client.BatchV1Api(api).create_namespaced_job(
            NS, agent.job(NS, "ghcr.io/nvidia/aicr:v0.19.0", GPU_SELECTOR, tolerations=[])
        )
        pod = agent_pod(api)
        kubectl = kubectl_for(cluster.kubeconfig, tmp_path)

        shown = json.loads(kubectl("get", "pod", "-n", NS, pod.metadata.name, "-o", "json"))
        assert shown["status"]["conditions"][0]["message"] == TAINTED_REFUSAL
        assert kubectl("get", "pods", "-n", NS).splitlines()[1].split()[:3] == [
            pod.metadata.name,
            "0/1",
            "Pending",
        ]
        table = kubectl("get", "events", "-n", NS).splitlines()
        assert table[0].split()[:4] == ["LAST", "SEEN", "TYPE", "REASON"]
        assert "FailedScheduling" in table[1]
        assert f"pod/{pod.metadata.name}" in table[1]
        assert "untolerated taint {nvidia.com/gpu: present}" in table[1]
        nodes = json.loads(kubectl("get", "nodes", "-o", "json"))["items"]
        tainted = [n["metadata"]["name"] for n in nodes if n["spec"].get("taints")]
        assert tainted == [n.name for n in scenario.nodes if n.taints]
