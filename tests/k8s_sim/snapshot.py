"""What AICR's snapshot agent would collect on the simulated cluster (AICR.md §2,
AICR-VALIDATE.md §2): host readings from the one node the agent landed on, cluster-wide
readings from the API. Simulated data, built from the ``Scenario``."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from hashlib import sha256
from typing import Any

import yaml

from .scenarios import Node, Scenario


def node_labels(scenario: Scenario, node: Node) -> dict[str, str]:
    labels = {
        "kubernetes.io/hostname": node.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": node.instance_type,
        "topology.kubernetes.io/region": _region(node.zone),
        "topology.kubernetes.io/zone": node.zone,
        "eks.amazonaws.com/nodegroup": "gpu" if node.gpus else "system",
    }
    if node.gpus and scenario.gpu_operator_version:
        # Labels that NFD + GPU feature discovery put on GPU nodes.
        labels.update(
            {
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.count": str(node.gpus),
                "nvidia.com/gpu.product": node.gpu_product,
                "nvidia.com/gpu.deploy.driver": "true",
            }
        )
    labels.update(node.extra_labels)
    return labels


def _region(zone: str) -> str:
    """AWS zones append a letter (us-east-1a), GCP zones a dash and a letter (us-central1-a)."""
    return zone[:-2] if zone[-2:-1] == "-" else zone[:-1]


def agent_node(scenario: Scenario) -> Node:
    """The node the agent lands on: a GPU node when any is labelled, else the first node."""
    gpu = [node for node in scenario.nodes if node.gpus and scenario.gpu_operator_version]
    return (gpu or list(scenario.nodes))[0]


def _model(node: Node) -> str:
    for model in ("GB200", "B200", "H200", "H100", "A100", "L40S"):
        if model in node.gpu_product.upper():
            return model
    return node.gpu_product or ""


def build_snapshot(scenario: Scenario, *, agent_version: str) -> dict[str, Any]:
    node = agent_node(scenario)
    k8s_subtypes: list[dict[str, Any]] = [
        {
            "subtype": "server",
            "data": {
                "version": scenario.kubernetes_version,
                "platform": scenario.platform,
                "goVersion": scenario.go_version,
            },
        },
        {
            "subtype": "node",
            "data": {
                "source-node": node.name,
                "provider": scenario.provider,
                "provider-id": f"aws:///{node.zone}/i-0{sha256(node.name.encode()).hexdigest()[:16]}",
                "container-runtime-id": scenario.container_runtime,
                "container-runtime-name": scenario.container_runtime.split("://")[0],
                "container-runtime-version": scenario.container_runtime.split("://")[-1],
                "kubelet-version": scenario.kubernetes_version,
                "kernel-version": scenario.kernel,
                "operating-system": "linux",
                "os-image": scenario.os_release.get("PRETTY_NAME", ""),
            },
        },
    ]
    images = {name: version for name, version in scenario.components.items() if version}
    if images:
        k8s_subtypes.append({"subtype": "image", "data": dict(sorted(images.items()))})
    if scenario.gpu_operator_version:
        k8s_subtypes.append(
            {
                "subtype": "policy",
                "data": {
                    "driver.enabled": "true",
                    "toolkit.enabled": "true",
                    "devicePlugin.enabled": "true",
                    "dcgmExporter.enabled": "true" if scenario.dcgm_exporter else "false",
                    "gfd.enabled": "true",
                    "cdi.enabled": "true",
                },
            }
        )
    measurements: list[dict[str, Any]] = [
        {"type": "K8s", "subtypes": k8s_subtypes},
        {
            "type": "OS",
            "subtypes": [
                {"subtype": "release", "data": dict(scenario.os_release)},
                {
                    "subtype": "sysctl",
                    "data": {
                        "/proc/sys/kernel/osrelease": scenario.kernel,
                        "/proc/sys/kernel/numa_balancing": "0",
                    },
                },
            ],
        },
        {
            "type": "SystemD",
            "subtypes": [
                {
                    "subtype": "containerd.service",
                    "data": {
                        "ActiveState": "active",
                        "SubState": "running",
                        "UnitFileState": "enabled",
                    },
                },
                {
                    "subtype": "kubelet.service",
                    "data": {
                        "ActiveState": "active",
                        "SubState": "running",
                        "UnitFileState": "enabled",
                    },
                },
            ],
        },
        {
            "type": "GPU",
            "subtypes": [
                {
                    "subtype": "hardware",
                    "data": {
                        "gpu-present": node.gpus > 0,
                        "gpu-count": node.gpus,
                        "driver-loaded": bool(node.gpus and scenario.gpu_operator_version),
                        "detection-source": "pci",
                        "model": _model(node) if node.gpus else "",
                    },
                }
            ],
        },
        {"type": "NodeTopology", "subtypes": _topology(scenario)},
    ]
    return {
        "apiVersion": "aicr.run/v1alpha2",
        "kind": "Snapshot",
        "metadata": {
            "timestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "version": agent_version,
            "source-node": node.name,
        },
        "measurements": measurements,
    }


def _topology(scenario: Scenario) -> list[dict[str, Any]]:
    labels: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    taints: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for node in scenario.nodes:
        for key, value in node_labels(scenario, node).items():
            labels[key][value].append(node.name)
        for taint in node.taints:
            taints[taint["key"]][f"{taint.get('effect', '')}|{taint.get('value', '')}"].append(
                node.name
            )
    label_data = {
        key: "; ".join(f"{value}|{','.join(nodes)}" for value, nodes in sorted(by_value.items()))
        for key, by_value in sorted(labels.items())
    }
    taint_data = {
        key: "; ".join(f"{value}|{','.join(nodes)}" for value, nodes in sorted(by_value.items()))
        for key, by_value in sorted(taints.items())
    }
    subtypes: list[dict[str, Any]] = [
        {
            "subtype": "summary",
            "data": {
                "node-count": len(scenario.nodes),
                "taint-count": len(taint_data),
                "label-count": len(label_data),
            },
        },
        {"subtype": "label", "data": label_data},
    ]
    if taint_data:
        subtypes.append({"subtype": "taint", "data": taint_data})
    return subtypes


def snapshot_yaml(scenario: Scenario, *, agent_version: str) -> str:
    return yaml.safe_dump(
        build_snapshot(scenario, agent_version=agent_version), sort_keys=False, width=1000
    )
