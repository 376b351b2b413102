"""The snapshot agent: one privileged Job that writes ConfigMap ``aicr-snapshot`` (§2)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

AGENT_JOB = "aicr-validate"
AGENT_SA = "aicr"
AGENT_CLUSTER_ROLE = "aicr-node-reader"
SNAPSHOT_CONFIGMAP = "aicr-snapshot"
_LABELS = {"app.kubernetes.io/name": "aicr"}
# AICR 1.x (PR #2320, AICR-V1.md §6): with no --toleration the agent tolerates every taint, so
# it lands on tainted GPU pools (GKE's nvidia.com/gpu=present:NoSchedule, AKS, ...).
DEFAULT_TOLERATIONS: tuple[Mapping[str, Any], ...] = ({"operator": "Exists"},)


def role(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": AGENT_SA, "namespace": namespace, "labels": dict(_LABELS)},
        "rules": [
            {
                "apiGroups": [""],
                "resources": ["configmaps"],
                "verbs": ["create", "get", "update", "patch"],
            },
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
        ],
    }


def role_binding(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": AGENT_SA, "namespace": namespace, "labels": dict(_LABELS)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": AGENT_SA},
        "subjects": [{"kind": "ServiceAccount", "name": AGENT_SA, "namespace": namespace}],
    }


def cluster_role() -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": AGENT_CLUSTER_ROLE, "labels": dict(_LABELS)},
        "rules": [
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
            {
                "apiGroups": ["nvidia.com"],
                "resources": ["clusterpolicies"],
                "verbs": ["get", "list"],
            },
            {
                "apiGroups": ["slinky.slurm.net"],
                "resources": ["controllers", "nodesets", "loginsets", "restapis", "accountings"],
                "verbs": ["list"],
            },
            {"apiGroups": ["k8s.mariadb.com"], "resources": ["mariadbs"], "verbs": ["list"]},
        ],
    }


def cluster_role_binding(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": AGENT_CLUSTER_ROLE, "labels": dict(_LABELS)},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": AGENT_CLUSTER_ROLE,
        },
        "subjects": [{"kind": "ServiceAccount", "name": AGENT_SA, "namespace": namespace}],
    }


def service_account(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": AGENT_SA, "namespace": namespace, "labels": dict(_LABELS)},
    }


def job(
    namespace: str,
    image: str,
    node_selector: Mapping[str, str],
    *,
    tolerations: Sequence[Mapping[str, Any]] | None = None,
    image_pull_secrets: Sequence[str] = (),
) -> dict[str, Any]:
    """The agent Job as ``aicr validate`` deploys it (privileged, 5 h deadline).

    ``tolerations`` None is AICR's default (tolerate all); an empty list gives none. Pull
    secrets and tolerations are set on the pod as in AICR's ``buildPodSpec``
    (``pkg/k8s/agent/job.go``: ``Tolerations``, ``ImagePullSecrets`` one ``{name}`` each).
    """
    chosen = DEFAULT_TOLERATIONS if tolerations is None else tolerations
    pod_spec: dict[str, Any] = {
        "serviceAccountName": AGENT_SA,
        "restartPolicy": "Never",
        "hostPID": True,
        "hostNetwork": True,
        "hostIPC": True,
        "securityContext": {"runAsUser": 0, "runAsGroup": 0, "fsGroup": 0},
        "containers": [
            {
                "name": "aicr",
                "image": image,
                "command": ["aicr"],
                "args": ["snapshot", "-o", f"cm://{namespace}/{SNAPSHOT_CONFIGMAP}"],
                "env": [
                    {"name": "AICR_AGENT_MODE", "value": "true"},
                    {"name": "AICR_LOG_PREFIX", "value": "agent"},
                    {
                        "name": "NODE_NAME",
                        "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}},
                    },
                ],
                "securityContext": {
                    "privileged": True,
                    "capabilities": {"add": ["SYS_ADMIN", "SYS_CHROOT"]},
                },
                "resources": {
                    "requests": {"cpu": "1", "memory": "4Gi", "ephemeral-storage": "2Gi"},
                    "limits": {"cpu": "2", "memory": "8Gi", "ephemeral-storage": "4Gi"},
                },
                "volumeMounts": [
                    {"name": "tmp", "mountPath": "/tmp"},  # noqa: S108 - the agent's own emptyDir,
                    {"name": "run-systemd", "mountPath": "/run/systemd", "readOnly": True},
                    {"name": "os-release", "mountPath": "/etc/os-release", "readOnly": True},
                ],
            }
        ],
        "volumes": [
            {"name": "tmp", "emptyDir": {}},
            {"name": "run-systemd", "hostPath": {"path": "/run/systemd", "type": "Directory"}},
            {"name": "os-release", "hostPath": {"path": "/etc/os-release", "type": "File"}},
        ],
    }
    if node_selector:
        pod_spec["nodeSelector"] = dict(node_selector)
    if chosen:
        pod_spec["tolerations"] = [dict(t) for t in chosen]
    if image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": name} for name in image_pull_secrets]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": AGENT_JOB, "namespace": namespace, "labels": dict(_LABELS)},
        "spec": {
            "completions": 1,
            "parallelism": 1,
            "completionMode": "NonIndexed",
            "backoffLimit": 0,
            "ttlSecondsAfterFinished": 3600,
            "activeDeadlineSeconds": 18000,
            "template": {"metadata": {"labels": dict(_LABELS)}, "spec": pod_spec},
        },
    }
