"""The simulated Kubernetes API server, driven by the official ``kubernetes`` client (v37).

Each call the orchestrator makes (discovery, SSA, create, get, list by field/label selector,
watch from a resourceVersion, pod logs, Foreground delete) is made here with the real client,
whose pydantic models reject any shape the real API server would not send.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import urllib3
import yaml
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from tests.k8s_sim import SCENARIOS, ApiFaults, Scenario, SimulatedCluster, WatchFaults
from tests.k8s_sim.images import digest_of, normalized
from tests.validators_app.kubectl import HAS_KUBECTL, kubectl_for

NS = "aicr-validation"
RUN_ID = "20260819-101500-0123456789abcdef"
SA = f"aicr-validator-{RUN_ID}"
APPLY = {"field_manager": "aicr", "force": True, "_content_type": "application/apply-patch+yaml"}

# What a recipe like h100-eks-ubuntu-training-kubeflow puts in the run's ValidationInput.
VALIDATION_INPUT = {
    "apiVersion": "validator.nvidia.com/v1alpha1",
    "kind": "ValidationInput",
    "metadata": {"version": "v0.19.0"},
    "config": {
        "deployment": {
            "constraints": [{"name": "Deployment.gpu-operator.version", "value": ">= v24.6.0"}]
        },
        "performance": {"constraints": [{"name": "nccl-all-reduce-bw", "value": ">= 300"}]},
    },
    "componentRefs": [
        {"name": "gpu-operator", "namespace": "gpu-operator"},
        {"name": "nvidia-dra-driver-gpu", "namespace": "nvidia-dra-driver"},
        {"name": "kube-prometheus-stack", "namespace": "monitoring"},
    ],
    "criteria": {"service": "eks", "accelerator": "h100", "intent": "training", "os": "ubuntu"},
}


@pytest.fixture
def healthy() -> Iterator[SimulatedCluster]:
    with SimulatedCluster(SCENARIOS["healthy-h100-eks"]) as cluster:
        yield cluster


def api_for(cluster: SimulatedCluster) -> kubernetes.client.ApiClient:
    return kubernetes.config.new_client_from_config_dict(yaml.safe_load(cluster.kubeconfig))


def prepare_run(api: kubernetes.client.ApiClient, validation: dict[str, Any] | None = None) -> None:
    """Namespace (SSA), per-run ServiceAccount, data ConfigMaps — AICR-VALIDATE §4."""
    core = client.CoreV1Api(api)
    core.patch_namespace(
        NS, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}, **APPLY
    )
    core.patch_namespaced_service_account(
        SA, NS, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SA}}, **APPLY
    )
    for name, key, text in (
        (
            f"aicr-validation-{RUN_ID}",
            "validation.yaml",
            yaml.safe_dump(validation or VALIDATION_INPUT),
        ),
        (f"aicr-snapshot-{RUN_ID}", "snapshot.yaml", "kind: Snapshot\n"),
    ):
        core.create_namespaced_config_map(NS, {"metadata": {"name": name}, "data": {key: text}})


def validator_job(check: str, phase: str = "deployment", deadline: int = 120) -> dict[str, Any]:
    """The Job of AICR-VALIDATE §5 (trimmed to the fields the simulator acts on)."""
    name = f"aicr-{check}-1a2b3c4d"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {"aicr.run/run-id": RUN_ID, "aicr.run/validator": check},
        },
        "spec": {
            "activeDeadlineSeconds": deadline,
            "backoffLimit": 0,
            "ttlSecondsAfterFinished": 3600,
            "template": {
                "metadata": {"labels": {"aicr.run/validator": check}},
                "spec": {
                    "serviceAccountName": SA,
                    "restartPolicy": "Never",
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [
                        {
                            "name": "validator",
                            "image": f"ghcr.io/nvidia/aicr-validators/{phase}:v0.19.0",
                            "args": [check],
                        }
                    ],
                    "volumes": [
                        {"name": "snapshot", "configMap": {"name": f"aicr-snapshot-{RUN_ID}"}},
                        {"name": "validation", "configMap": {"name": f"aicr-validation-{RUN_ID}"}},
                    ],
                },
            },
        },
    }


def wait_terminal(api: kubernetes.client.ApiClient, name: str, rv: str) -> client.V1Job:
    """AICR's WaitForJobTerminal: watch by field selector from rv, re-list on close/410."""
    batch = client.BatchV1Api(api)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            for event in watch.Watch().stream(
                batch.list_namespaced_job,
                NS,
                field_selector=f"metadata.name={name}",
                resource_version=rv,
                timeout_seconds=5,
            ):
                job = event["object"]
                rv = job.metadata.resource_version
                if any(
                    c.type in ("Complete", "Failed") and c.status == "True"
                    for c in job.status.conditions or []
                ):
                    return job
        except ApiException as error:
            if error.status != 410:
                raise
        listed = batch.list_namespaced_job(NS, field_selector=f"metadata.name={name}")
        rv = listed.metadata.resource_version
        for job in listed.items:
            if any(c.type in ("Complete", "Failed") for c in job.status.conditions or []):
                return job
    raise AssertionError(f"Job {name} never became terminal")


def run_check(
    api: kubernetes.client.ApiClient, check: str, phase: str = "deployment", deadline: int = 120
) -> tuple[client.V1Job, client.V1Pod | None, str]:
    batch, core = client.BatchV1Api(api), client.CoreV1Api(api)
    job = validator_job(check, phase, deadline)
    name = job["metadata"]["name"]
    applied = batch.patch_namespaced_job(name, NS, job, **APPLY)
    done = wait_terminal(api, name, applied.metadata.resource_version)
    pods = core.list_namespaced_pod(NS, label_selector=f"batch.kubernetes.io/job-name={name}")
    live = [pod for pod in pods.items if pod.metadata.deletion_timestamp is None]
    if not live:
        return done, None, ""
    try:
        log = core.read_namespaced_pod_log(live[0].metadata.name, NS, container="validator")
    except ApiException as error:  # 400 while the container never started
        if error.status != 400:
            raise
        log = ""
    return done, live[0], log


def terminated(pod: client.V1Pod) -> client.V1ContainerStateTerminated:
    (status,) = [s for s in pod.status.container_statuses if s.name == "validator"]
    return status.state.terminated


def test_it_serves_discovery_the_client_parses(healthy: SimulatedCluster) -> None:
    api = api_for(healthy)
    version = client.VersionApi(api).get_code()
    assert version.git_version == "v1.33.5-eks-113cf36"
    assert (version.major, version.minor) == ("1", "33")
    groups = {group.name for group in client.ApisApi(api).get_api_versions().groups}
    assert {"batch", "rbac.authorization.k8s.io", "resource.k8s.io"} <= groups
    batch_resources = {r.name for r in client.BatchV1Api(api).get_api_resources().resources}
    assert {"jobs", "jobs/status"} <= batch_resources
    core_resources = {r.name: r for r in client.CoreV1Api(api).get_api_resources().resources}
    assert core_resources["pods/log"].verbs == ["get"]
    assert core_resources["namespaces"].namespaced is False


def test_it_refuses_a_wrong_token(healthy: SimulatedCluster) -> None:
    config = yaml.safe_load(healthy.kubeconfig)
    config["users"][0]["user"]["token"] = "wrong"
    api = kubernetes.config.new_client_from_config_dict(config)
    with pytest.raises(ApiException) as raised:
        client.CoreV1Api(api).list_namespace()
    assert raised.value.status == 401
    assert yaml.safe_load(raised.value.body)["reason"] == "Unauthorized"


def test_it_lists_nodes_by_label_with_a_limit_and_continue(healthy: SimulatedCluster) -> None:
    core = client.CoreV1Api(api_for(healthy))
    first = core.list_node(label_selector="nvidia.com/gpu.present=true", limit=1)
    assert len(first.items) == 1
    assert first.metadata.remaining_item_count == 1
    rest = core.list_node(
        label_selector="nvidia.com/gpu.present=true", limit=1, _continue=first.metadata._continue
    )
    names = {first.items[0].metadata.name, rest.items[0].metadata.name}
    assert names == {"ip-10-0-12-34.ec2.internal", "ip-10-0-56-78.ec2.internal"}
    assert rest.items[0].status.allocatable["nvidia.com/gpu"] == "8"
    assert len(core.list_node(label_selector="!nvidia.com/gpu.present").items) == 1


def test_it_answers_status_objects_for_missing_and_existing_objects(
    healthy: SimulatedCluster,
) -> None:
    core = client.CoreV1Api(api_for(healthy))
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_config_map("nope", "default")
    status = yaml.safe_load(missing.value.body)
    assert (missing.value.status, status["reason"]) == (404, "NotFound")
    assert status["message"] == 'configmaps "nope" not found'
    assert status["details"] == {"name": "nope", "kind": "configmaps"}
    core.create_namespaced_config_map("default", {"metadata": {"name": "a"}, "data": {"k": "v"}})
    with pytest.raises(ApiException) as exists:
        core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    assert (exists.value.status, yaml.safe_load(exists.value.body)["reason"]) == (
        409,
        "AlreadyExists",
    )
    with pytest.raises(ApiException) as no_namespace:
        core.create_namespaced_config_map("ghost", {"metadata": {"name": "a"}})
    assert yaml.safe_load(no_namespace.value.body)["message"] == 'namespaces "ghost" not found'


def test_it_rejects_a_stale_update_with_conflict(healthy: SimulatedCluster) -> None:
    core = client.CoreV1Api(api_for(healthy))
    created = core.create_namespaced_config_map(
        "default", {"metadata": {"name": "cm"}, "data": {"k": "1"}}
    )
    created.data = {"k": "2"}
    updated = core.replace_namespaced_config_map("cm", "default", created)
    assert int(updated.metadata.resource_version) > int(created.metadata.resource_version)
    created.data = {"k": "3"}  # still carries the old resourceVersion
    with pytest.raises(ApiException) as stale:
        core.replace_namespaced_config_map("cm", "default", created)
    assert yaml.safe_load(stale.value.body)["reason"] == "Conflict"
    assert core.read_namespaced_config_map("cm", "default").data == {"k": "2"}


def test_it_runs_the_snapshot_agent_and_writes_the_snapshot_configmap(
    healthy: SimulatedCluster,
) -> None:
    api = api_for(healthy)
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    prepare_run(api)
    core.create_namespaced_service_account(NS, {"metadata": {"name": "aicr"}})
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "aicr-validate", "labels": {"app.kubernetes.io/name": "aicr"}},
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": 18000,
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": "aicr"}},
                "spec": {
                    "serviceAccountName": "aicr",
                    "restartPolicy": "Never",
                    "nodeSelector": {"nvidia.com/gpu.present": "true"},
                    "containers": [
                        {
                            "name": "aicr",
                            "image": "ghcr.io/nvidia/aicr:v0.19.0",
                            "command": ["aicr"],
                            "args": ["snapshot", "-o", f"cm://{NS}/aicr-snapshot"],
                        }
                    ],
                },
            },
        },
    }
    created = batch.create_namespaced_job(NS, job)
    done = wait_terminal(api, "aicr-validate", created.metadata.resource_version)
    assert [c.type for c in done.status.conditions] == ["SuccessCriteriaMet", "Complete"]
    snapshot = yaml.safe_load(
        core.read_namespaced_config_map("aicr-snapshot", NS).data["snapshot.yaml"]
    )
    assert snapshot["kind"] == "Snapshot"
    assert snapshot["metadata"]["version"] == "v0.19.0"
    by_type = {
        m["type"]: {s["subtype"]: s["data"] for s in m["subtypes"]}
        for m in snapshot["measurements"]
    }
    assert by_type["K8s"]["server"]["version"] == "v1.33.5-eks-113cf36"
    assert by_type["OS"]["release"]["VERSION_ID"] == "24.04"
    assert by_type["OS"]["sysctl"]["/proc/sys/kernel/osrelease"] == "6.8.0-1015-aws"
    assert by_type["GPU"]["hardware"]["model"] == "H100"
    assert snapshot["metadata"]["source-node"] in {
        "ip-10-0-12-34.ec2.internal",
        "ip-10-0-56-78.ec2.internal",
    }


def test_it_plays_a_passing_validator_with_aicr_logs_and_extras(healthy: SimulatedCluster) -> None:
    api = api_for(healthy)
    prepare_run(api)
    job, pod, log = run_check(api, "check-nvidia-smi", deadline=600)
    assert [c.type for c in job.status.conditions] == ["SuccessCriteriaMet", "Complete"]
    assert pod is not None
    assert pod.status.phase == "Succeeded"
    assert pod.metadata.labels["batch.kubernetes.io/job-name"] == job.metadata.name
    state = terminated(pod)
    assert (state.exit_code, state.reason, state.message) == (0, "Completed", None)
    assert (state.finished_at - state.started_at).total_seconds() == 24  # simulated seconds
    lines = log.splitlines()
    assert lines[0].startswith("time=")
    assert 'msg="starting check" name=check-nvidia-smi' in lines[0]
    assert "RESULT: nodesValidated: 2/2" in lines
    assert lines[-1] == '##AICR-EXTRA## {"nodesValidated":"2","nodesTotal":"2"}'


def test_it_fails_a_check_with_a_termination_message_and_backoff_limit() -> None:
    with SimulatedCluster(SCENARIOS["gpu-operator-too-old"]) as cluster:
        api = api_for(cluster)
        prepare_run(api)
        job, pod, log = run_check(api, "gpu-operator-version")
    failed = next(c for c in job.status.conditions if c.type == "Failed")
    assert (failed.reason, failed.message) == (
        "BackoffLimitExceeded",
        "Job has reached the specified backoff limit",
    )
    state = terminated(pod)
    assert state.exit_code == 1
    assert state.message == (
        '[INTERNAL] GPU Operator version v23.9.2 does not satisfy constraint ">= v24.6.0"'
    )
    assert "Constraint: >= v24.6.0 → false" in log
    assert pod.status.phase == "Failed"


def test_it_skips_with_exit_2_as_aicr_does() -> None:
    validation = {**VALIDATION_INPUT, "config": {}}
    with SimulatedCluster(SCENARIOS["healthy-h100-eks"]) as cluster:
        api = api_for(cluster)
        prepare_run(api, validation)
        job, pod, log = run_check(api, "gpu-operator-version")
    assert [c.reason for c in job.status.conditions if c.type == "Failed"] == [
        "BackoffLimitExceeded"
    ]
    state = terminated(pod)
    assert state.exit_code == 2
    assert state.message == (
        "[INTERNAL] no Deployment.gpu-operator.version constraint in recipe; detected v26.3.3: skip"
    )
    assert 'level=INFO msg=SKIP reason="[INTERNAL] no Deployment' in log


def test_it_deletes_a_job_in_the_foreground_with_its_pod(healthy: SimulatedCluster) -> None:
    api = api_for(healthy)
    prepare_run(api)
    job, _pod, _log = run_check(api, "operator-health")
    batch = client.BatchV1Api(api)
    answer = batch.delete_namespaced_job(
        job.metadata.name, NS, propagation_policy="Foreground", _preload_content=False
    )
    # Foreground: the answer is the Job itself, marked for deletion until its pods are gone.
    still = json.loads(answer.data)
    assert still["kind"] == "Job"
    assert still["metadata"]["deletionTimestamp"]
    assert still["metadata"]["finalizers"] == ["foregroundDeletion"]
    deadline = time.monotonic() + 5
    while healthy.objects("Job", NS) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert healthy.objects("Job", NS) == []
    assert healthy.objects("Pod", NS) == []
    assert (
        "DELETE",
        f"/apis/batch/v1/namespaces/{NS}/jobs/{job.metadata.name}",
    ) in healthy.requests


def test_it_kills_a_job_past_its_deadline_and_removes_the_pod() -> None:
    with SimulatedCluster(SCENARIOS["job-deadline-exceeded"]) as cluster:
        api = api_for(cluster)
        prepare_run(api)
        started = time.monotonic()
        job, pod, _log = run_check(api, "expected-resources", deadline=480)
        elapsed = time.monotonic() - started
    failed = next(c for c in job.status.conditions if c.type == "Failed")
    assert (failed.reason, failed.message) == (
        "DeadlineExceeded",
        "Job was active longer than specified deadline",
    )
    assert pod is None  # deleted by the Job controller, as AICR-VALIDATE §6.3 expects
    assert 0.4 < elapsed < 5  # 480 s of simulated time at 1 ms per second


def test_it_ends_watches_early_and_answers_410_on_stale_versions() -> None:
    scenario = dataclasses.replace(
        SCENARIOS["healthy-h100-eks"], watch_faults=WatchFaults(max_events=1), watch_history=5
    )
    with SimulatedCluster(scenario) as cluster:
        api = api_for(cluster)
        core = client.CoreV1Api(api)
        start_rv = core.list_namespace().metadata.resource_version
        for index in range(10):
            core.create_namespaced_config_map("default", {"metadata": {"name": f"c{index}"}})
        with pytest.raises(ApiException) as gone:
            list(
                watch.Watch().stream(
                    core.list_namespaced_config_map,
                    "default",
                    resource_version=start_rv,
                    timeout_seconds=2,
                )
            )
        assert gone.value.status == 410
        fresh_rv = core.list_namespaced_config_map("default").metadata.resource_version
        core.create_namespaced_config_map("default", {"metadata": {"name": "late"}})
        core.create_namespaced_config_map("default", {"metadata": {"name": "later"}})
        events = list(
            watch.Watch().stream(
                core.list_namespaced_config_map,
                "default",
                resource_version=fresh_rv,
                timeout_seconds=2,
            )
        )
        assert [event["object"].metadata.name for event in events] == ["late"]  # closed after 1


def test_it_answers_injected_500s_then_recovers() -> None:
    scenario: Scenario = dataclasses.replace(
        SCENARIOS["healthy-h100-eks"], api_faults=ApiFaults(status=500, first_n=2)
    )
    with SimulatedCluster(scenario) as cluster:
        core = client.CoreV1Api(api_for(cluster))
        for _ in range(2):
            with pytest.raises(ApiException) as failed:
                core.list_namespace()
            assert failed.value.status == 500
            assert yaml.safe_load(failed.value.body)["reason"] == "InternalError"
        assert core.list_namespace().items
    assert [record.status for record in cluster.request_log] == [500, 500, 200]


@pytest.mark.skipif(not HAS_KUBECTL, reason="kubectl is not installed")
def test_it_gives_kubectl_the_same_answers_as_the_python_client(tmp_path: Path) -> None:
    """A second real client (client-go, via kubectl) agrees with the python client on shapes."""
    with SimulatedCluster(SCENARIOS["healthy-h100-eks"], tls=True) as cluster:
        api = api_for(cluster)
        prepare_run(api)
        (tmp_path / "job.yaml").write_text(yaml.safe_dump(validator_job("operator-health")))
        kubectl = kubectl_for(cluster.kubeconfig, tmp_path)

        core = client.CoreV1Api(api)
        names = kubectl("get", "namespaces", "-o", "name").split()
        assert names == [f"namespace/{ns.metadata.name}" for ns in core.list_namespace().items]
        table = kubectl("get", "namespaces")
        assert table.splitlines()[0].split() == ["NAME", "STATUS", "AGE"]

        applied = kubectl("apply", "--server-side", "-f", str(tmp_path / "job.yaml"))
        assert applied.strip() == "job.batch/aicr-operator-health-1a2b3c4d serverside-applied"
        patch = next(r for r in cluster.request_log if r.method == "PATCH" and "/jobs/" in r.path)
        assert patch.query["fieldManager"] == "kubectl"
        assert patch.query["fieldValidation"] == "Strict"  # validated server-side, no schemas
        job = wait_terminal(api, "aicr-operator-health-1a2b3c4d", "0")

        listed = json.loads(kubectl("get", "jobs", "-n", NS, "-o", "json"))
        (item,) = listed["items"]
        assert item["metadata"]["uid"] == job.metadata.uid
        assert item["metadata"]["resourceVersion"] == job.metadata.resource_version
        assert job.metadata.managed_fields[0].manager == "kubectl"  # kubectl hides them
        assert [c["type"] for c in item["status"]["conditions"]] == [
            c.type for c in job.status.conditions
        ]
        assert item["spec"]["selector"]["matchLabels"] == job.spec.selector.match_labels
        (pod,) = core.list_namespaced_pod(
            NS, label_selector=f"batch.kubernetes.io/job-name={job.metadata.name}"
        ).items
        assert kubectl("get", "pods", "-n", NS).splitlines()[1].split()[:3] == [
            pod.metadata.name,
            "0/1",
            "Completed",
        ]
        # client-go reads the runtime's image report as the python client does
        image_id = kubectl(
            "get", "pod", "-n", NS, pod.metadata.name,
            "-o", "jsonpath={.status.containerStatuses[0].imageID}",
        )  # fmt: skip
        assert image_id == pod.status.container_statuses[0].image_id
        assert image_id.startswith("ghcr.io/nvidia/aicr-validators/deployment@sha256:")
        via_kubectl = kubectl("logs", "-n", NS, f"job/{job.metadata.name}", "-c", "validator")
        via_python = core.read_namespaced_pod_log(pod.metadata.name, NS, container="validator")
        assert via_kubectl == via_python
        assert "Running: 1/1" in via_kubectl


MODELS = {
    "Namespace": "V1Namespace",
    "Node": "V1Node",
    "Pod": "V1Pod",
    "ConfigMap": "V1ConfigMap",
    "ServiceAccount": "V1ServiceAccount",
    "Job": "V1Job",
    "Role": "V1Role",
    "RoleBinding": "V1RoleBinding",
    "ClusterRole": "V1ClusterRole",
    "ClusterRoleBinding": "V1ClusterRoleBinding",
    "Event": "CoreV1Event",
    "Deployment": "V1Deployment",
    "DaemonSet": "V1DaemonSet",
}


def test_every_object_it_serves_fits_the_clients_models(healthy: SimulatedCluster) -> None:
    """The v37 client's pydantic models reject missing required fields and wrong types."""
    api = api_for(healthy)
    prepare_run(api)
    rbac = client.RbacAuthorizationV1Api(api)
    rbac.patch_cluster_role_binding(
        SA,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": SA},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "cluster-admin",
            },
            "subjects": [{"kind": "ServiceAccount", "name": SA, "namespace": NS}],
        },
        **APPLY,
    )
    run_check(api, "check-nvidia-smi", deadline=600)  # a Job, its pod, status and conditions
    served = list(healthy.store.all_objects())
    assert {resource.kind for resource, _obj in served} >= {
        "Namespace",
        "Node",
        "Pod",
        "ConfigMap",
        "ServiceAccount",
        "Job",
        "ClusterRoleBinding",
    }
    for resource, obj in served:
        model = api.deserialize(json.dumps(obj), MODELS[resource.kind], "application/json")
        assert model.metadata.name == obj["metadata"]["name"]
        assert model.metadata.uid
        assert model.metadata.creation_timestamp is not None


def test_a_job_gets_no_pod_until_its_service_account_exists(healthy: SimulatedCluster) -> None:
    api = api_for(healthy)
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    prepare_run(api)
    core.delete_namespaced_service_account(SA, NS)
    batch.patch_namespaced_job(
        "aicr-operator-health-1a2b3c4d", NS, validator_job("operator-health"), **APPLY
    )
    time.sleep(0.05)
    assert healthy.objects("Pod", NS) == []
    core.create_namespaced_service_account(NS, {"metadata": {"name": SA}})
    job = wait_terminal(api, "aicr-operator-health-1a2b3c4d", "0")
    assert [c.type for c in job.status.conditions][-1] == "Complete"


def test_an_image_that_never_pulls_waits_until_the_deadline() -> None:
    kept = dataclasses.replace(SCENARIOS["image-never-pulled"], keep_pod_on_deadline=True)
    for scenario, pod_remains in ((SCENARIOS["image-never-pulled"], False), (kept, True)):
        with SimulatedCluster(scenario) as cluster:
            api = api_for(cluster)
            core = client.CoreV1Api(api)
            prepare_run(api)
            job, pod, _log = run_check(api, "operator-health", deadline=120)
            assert next(c for c in job.status.conditions if c.type == "Failed").reason == (
                "DeadlineExceeded"
            )
            assert (pod is not None) == pod_remains
            if pod is None:
                continue
            (status,) = pod.status.container_statuses
            assert status.state.waiting.reason == "ImagePullBackOff"
            assert status.state.waiting.message == (
                'Back-off pulling image "ghcr.io/nvidia/aicr-validators/deployment:v0.19.0"'
            )
            with pytest.raises(ApiException) as waiting:
                core.read_namespaced_pod_log(pod.metadata.name, NS, container="validator")
            assert waiting.value.status == 400
            assert yaml.safe_load(waiting.value.body)["message"] == (
                f'container "validator" in pod "{pod.metadata.name}" is waiting to start: '
                "trying and failing to pull image"
            )


def test_an_oom_killed_validator_terminates_with_137() -> None:
    with SimulatedCluster(SCENARIOS["oom-killed"]) as cluster:
        api = api_for(cluster)
        prepare_run(api)
        job, pod, _log = run_check(api, "expected-resources", deadline=480)
    assert pod is not None
    state = terminated(pod)
    assert (state.exit_code, state.reason, state.message) == (137, "OOMKilled", None)
    assert next(c for c in job.status.conditions if c.type == "Failed").reason == (
        "BackoffLimitExceeded"
    )


def test_it_answers_429_with_retry_after() -> None:
    with SimulatedCluster(SCENARIOS["api-429"]) as cluster:
        core = client.CoreV1Api(api_for(cluster))
        with pytest.raises(ApiException) as throttled:
            core.list_namespace()
    assert throttled.value.status == 429
    assert throttled.value.headers["Retry-After"] == "1"
    body = yaml.safe_load(throttled.value.body)
    assert (body["reason"], body["details"]["retryAfterSeconds"]) == ("TooManyRequests", 1)


def test_an_unreachable_cluster_refuses_connections() -> None:
    with SimulatedCluster(SCENARIOS["unreachable"]) as cluster:
        api = api_for(cluster)
        api.configuration.retries = 0
        with pytest.raises(urllib3.exceptions.MaxRetryError) as refused:
            client.VersionApi(api).get_code(_request_timeout=2)
    assert isinstance(refused.value.reason, urllib3.exceptions.NewConnectionError)
    assert cluster.url.startswith("http://127.0.0.1:")


@pytest.mark.parametrize(
    ("method", "path", "headers", "body", "status", "reason"),
    [
        ("POST", "/api/v1/namespaces/default/configmaps", {}, b"{not json", 400, "BadRequest"),
        ("POST", "/api/v1/namespaces/default/configmaps", {}, b"[1, 2]", 400, "BadRequest"),
        (
            "POST",
            "/api/v1/namespaces/default/configmaps",
            {},
            b'{"metadata": {"name": "Bad_Name"}}',
            422,
            "Invalid",
        ),
        (
            "POST",
            "/api/v1/namespaces/default/configmaps",
            {},
            json.dumps({"metadata": {"name": "big"}, "data": {"k": "x" * 1_100_000}}).encode(),
            422,
            "Invalid",
        ),
        (
            "POST",
            "/api/v1/namespaces/default/configmaps",
            {},
            json.dumps({"metadata": {"name": "l", "labels": {"a": "<script>"}}}).encode(),
            422,
            "Invalid",
        ),
        (
            "POST",
            "/api/v1/namespaces/default/configmaps",
            {},
            b"x" * (3 * 1024 * 1024 + 1),
            413,
            "RequestEntityTooLarge",
        ),
        (
            "GET",
            "/api/v1/namespaces/default/pods?labelSelector=a%20in%20(b",
            {},
            b"",
            400,
            "BadRequest",
        ),
        (
            "GET",
            "/api/v1/namespaces/default/pods?fieldSelector=spec.secret%3Dx",
            {},
            b"",
            400,
            "BadRequest",
        ),
        ("GET", "/api/v1/namespaces/default/widgets", {}, b"", 404, "NotFound"),
        (
            "PATCH",
            "/api/v1/namespaces/default/configmaps/x",
            {"Content-Type": "application/apply-patch+yaml"},
            b"kind: ConfigMap\napiVersion: v1\n",
            422,
            "Invalid",
        ),
        (
            "PATCH",
            "/api/v1/namespaces/default/configmaps/x?fieldManager=t",
            {"Content-Type": "application/apply-patch+yaml"},
            b"a: [unclosed",
            400,
            "BadRequest",
        ),
        (
            "PATCH",
            "/api/v1/namespaces/default/configmaps/x",
            {"Content-Type": "text/plain"},
            b"{}",
            415,
            "UnsupportedMediaType",
        ),
        (
            "DELETE",
            "/apis/batch/v1/namespaces/default/jobs/x?propagationPolicy=Sideways",
            {},
            b"",
            422,
            "Invalid",
        ),
    ],
)
def test_it_answers_bad_requests_with_a_status_naming_the_problem(
    healthy: SimulatedCluster,
    method: str,
    path: str,
    headers: dict[str, str],
    body: bytes,
    status: int,
    reason: str,
) -> None:
    pool = urllib3.PoolManager()
    answer = pool.request(
        method,
        healthy.url + path,
        body=body or None,
        headers={
            "Authorization": f"Bearer {healthy.scenario.token}",
            "Content-Type": "application/json",
            **headers,
        },
        retries=False,
    )
    assert answer.status == status, answer.data[:300]
    payload = json.loads(answer.data)
    assert (payload["kind"], payload["status"], payload["code"], payload["reason"]) == (
        "Status",
        "Failure",
        status,
        reason,
    )
    assert payload["message"]


def test_a_jobs_pod_template_is_immutable(healthy: SimulatedCluster) -> None:
    api = api_for(healthy)
    prepare_run(api)
    batch = client.BatchV1Api(api)
    job = validator_job("operator-health")
    batch.patch_namespaced_job(job["metadata"]["name"], NS, job, **APPLY)
    again = batch.patch_namespaced_job(job["metadata"]["name"], NS, job, **APPLY)  # resume
    assert again.metadata.generation == 1
    job["spec"]["template"]["spec"]["containers"][0]["args"] = ["expected-resources"]
    with pytest.raises(ApiException) as immutable:
        batch.patch_namespaced_job(job["metadata"]["name"], NS, job, **APPLY)
    assert immutable.value.status == 422
    assert "field is immutable" in yaml.safe_load(immutable.value.body)["message"]


def test_apply_without_force_conflicts_with_another_manager(healthy: SimulatedCluster) -> None:
    core = client.CoreV1Api(api_for(healthy))
    core.create_namespaced_config_map("default", {"metadata": {"name": "c"}, "data": {"k": "1"}})
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "2"}}
    with pytest.raises(ApiException) as conflict:
        core.patch_namespaced_config_map(
            "c", "default", body, field_manager="aicr", _content_type="application/apply-patch+yaml"
        )
    assert conflict.value.status == 409
    assert yaml.safe_load(conflict.value.body)["reason"] == "Conflict"
    forced = core.patch_namespaced_config_map("c", "default", body, **{**APPLY, "force": True})
    assert forced.data == {"k": "2"}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=a", {"p-a"}),
        ("app==a,tier=gpu", {"p-a"}),
        ("app!=a", {"p-b", "p-none"}),
        ("app in (a, b)", {"p-a", "p-b"}),
        ("app notin (a)", {"p-b", "p-none"}),
        ("app", {"p-a", "p-b"}),
        ("!app", {"p-none"}),
        ("", {"p-a", "p-b", "p-none"}),
    ],
)
def test_it_selects_by_label_like_the_api_server(
    healthy: SimulatedCluster, selector: str, expected: set[str]
) -> None:
    core = client.CoreV1Api(api_for(healthy))
    for name, labels in (
        ("p-a", {"app": "a", "tier": "gpu"}),
        ("p-b", {"app": "b"}),
        ("p-none", {}),
    ):
        core.create_namespaced_config_map("default", {"metadata": {"name": name, "labels": labels}})
    listed = core.list_namespaced_config_map("default", label_selector=selector)
    assert {item.metadata.name for item in listed.items} - {"kube-root-ca.crt"} == expected


def test_it_streams_pod_events_by_label_and_bookmarks_before_a_watch_ends(
    healthy: SimulatedCluster,
) -> None:
    """The agent path: WATCH pods by label until the agent pod is done."""
    api = api_for(healthy)
    core = client.CoreV1Api(api)
    prepare_run(api)
    start_rv = core.list_namespaced_pod(NS).metadata.resource_version
    client.BatchV1Api(api).patch_namespaced_job(
        "aicr-operator-health-1a2b3c4d", NS, validator_job("operator-health"), **APPLY
    )
    phases = []
    for event in watch.Watch().stream(
        core.list_namespaced_pod,
        NS,
        label_selector="aicr.run/validator=operator-health",
        resource_version=start_rv,
        timeout_seconds=1,
    ):
        phases.append((event["type"], event["object"].status.phase))
        if event["object"].status.phase == "Succeeded":
            break
    assert phases[0] == ("ADDED", "Pending")
    assert ("MODIFIED", "Running") in phases
    assert phases[-1] == ("MODIFIED", "Succeeded")
    answer = core.list_namespaced_pod(
        NS,
        watch=True,
        allow_watch_bookmarks=True,
        timeout_seconds=1,
        resource_version=core.list_namespaced_pod(NS).metadata.resource_version,
        _preload_content=False,
    )
    lines = [json.loads(line) for line in answer.data.splitlines()]
    assert [line["type"] for line in lines] == ["BOOKMARK"]
    assert lines[0]["object"]["metadata"]["resourceVersion"].isdigit()


def test_a_bug_in_the_simulator_fails_the_test_instead_of_passing_as_a_cluster_fault(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.k8s_sim import SimulatorBug, apiserver

    def broken(_scenario: Scenario) -> dict[str, str]:
        raise KeyError("boom")

    monkeypatch.setattr(apiserver, "version_info", broken)
    cluster = SimulatedCluster(SCENARIOS["healthy-h100-eks"])
    with pytest.raises(SimulatorBug, match="KeyError: 'boom'"), cluster:  # noqa: PT012 - at exit
        with pytest.raises(ApiException) as answered:
            client.VersionApi(api_for(cluster)).get_code()
        assert answered.value.status == 500
        assert "simulator bug" in yaml.safe_load(answered.value.body)["message"]


DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
DEPLOYMENT_IMAGE = "ghcr.io/nvidia/aicr-validators/deployment:v0.19.0"


def _validator_status(pod: client.V1Pod | None) -> client.V1ContainerStatus:
    assert pod is not None
    (status,) = [s for s in pod.status.container_statuses if s.name == "validator"]
    return status


@pytest.mark.parametrize(
    ("scenario", "image_id", "container_id"),
    [
        # containerd / CRI-O: <repository>@sha256:<digest the registry served>
        ("healthy-h100-eks", "ghcr.io/nvidia/aicr-validators/deployment@{digest}", "containerd://"),
        (
            "runtime-docker-pullable",
            "docker-pullable://ghcr.io/nvidia/aicr-validators/deployment@{digest}",
            "docker://",
        ),
    ],
)
def test_a_started_container_reports_its_image_and_repository_digest(
    scenario: str, image_id: str, container_id: str
) -> None:
    sim = SCENARIOS[scenario]
    with SimulatedCluster(sim) as cluster:
        api = api_for(cluster)
        prepare_run(api)
        _, pod, _ = run_check(api, "operator-health")
        _, again, _ = run_check(api, "check-nvidia-smi")  # the same image, another pod
    status = _validator_status(pod)
    digest = digest_of(sim, DEPLOYMENT_IMAGE)
    assert DIGEST.match(digest)
    assert status.image == DEPLOYMENT_IMAGE
    assert status.image_id == image_id.format(digest=digest)
    assert status.container_id.startswith(container_id)
    assert _validator_status(again).image_id == status.image_id  # deterministic per reference
    assert _validator_status(again).container_id != status.container_id


def test_a_node_loaded_image_reports_only_its_config_id() -> None:
    sim = SCENARIOS["runtime-config-id"]
    with SimulatedCluster(sim) as cluster:
        api = api_for(cluster)
        prepare_run(api)
        _, pod, _ = run_check(api, "operator-health")
    image_id = _validator_status(pod).image_id
    assert DIGEST.match(image_id)  # "sha256:<hex>" with no repository ...
    assert image_id != digest_of(sim, DEPLOYMENT_IMAGE)  # ... and not the registry's digest


def test_each_reference_has_its_own_digest_and_a_pinned_one_runs_exactly_that() -> None:
    moved = "sha256:" + "ab" * 32
    sim = dataclasses.replace(
        SCENARIOS["healthy-h100-eks"], image_digests={DEPLOYMENT_IMAGE: moved}
    )
    pinned = "sha256:" + "cd" * 32
    with SimulatedCluster(sim) as cluster:
        api = api_for(cluster)
        prepare_run(api)
        _, tagged, _ = run_check(api, "operator-health")
        _, other, _ = run_check(api, "nccl-all-reduce-bw", phase="performance", deadline=900)
        batch = client.BatchV1Api(api)
        job = validator_job("expected-resources", deadline=480)
        job["spec"]["template"]["spec"]["containers"][0]["image"] = (
            f"ghcr.io/nvidia/aicr-validators/deployment@{pinned}"
        )
        applied = batch.create_namespaced_job(NS, job)
        wait_terminal(api, applied.metadata.name, applied.metadata.resource_version)
        (by_digest,) = (
            client.CoreV1Api(api)
            .list_namespaced_pod(
                NS, label_selector=f"batch.kubernetes.io/job-name={applied.metadata.name}"
            )
            .items
        )
    assert _validator_status(tagged).image_id.endswith(f"@{moved}")  # the scenario's table
    performance = _validator_status(other).image_id
    assert performance.startswith("ghcr.io/nvidia/aicr-validators/performance@sha256:")
    assert performance.rsplit("@", 1)[1] not in (moved, pinned)
    assert _validator_status(by_digest).image_id == (
        f"ghcr.io/nvidia/aicr-validators/deployment@{pinned}"
    )


def test_a_container_not_yet_started_has_no_image_id(healthy: SimulatedCluster) -> None:
    api = api_for(healthy)
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    core.patch_namespace(
        NS, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}, **APPLY
    )
    core.patch_namespaced_service_account(
        SA, NS, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SA}}, **APPLY
    )
    job = batch.create_namespaced_job(NS, validator_job("operator-health"))  # no data ConfigMaps
    selector = f"batch.kubernetes.io/job-name={job.metadata.name}"
    deadline = time.monotonic() + 10
    pods: list[client.V1Pod] = []
    while not pods and time.monotonic() < deadline:
        pods = core.list_namespaced_pod(NS, label_selector=selector).items
        time.sleep(0.01)
    (pod,) = pods
    status = _validator_status(pod)
    assert status.state.waiting.reason == "ContainerCreating"
    assert (status.image, status.image_id, status.container_id) == (DEPLOYMENT_IMAGE, "", None)


@pytest.mark.parametrize(
    ("image", "reported"),
    [
        ("busybox", "docker.io/library/busybox:latest"),
        ("library/busybox:1.36", "docker.io/library/busybox:1.36"),
        ("localhost:5000/aicr/x:v1", "localhost:5000/aicr/x:v1"),
        (DEPLOYMENT_IMAGE, DEPLOYMENT_IMAGE),
        (f"{DEPLOYMENT_IMAGE.split(':')[0]}@sha256:{'ef' * 32}", None),  # unchanged
    ],
)
def test_containerd_normalizes_short_names_as_the_real_runtime_does(
    image: str, reported: str | None
) -> None:
    assert normalized(image) == (reported or image)
