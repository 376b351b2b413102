"""The cluster fingerprint a bundle's predicate carries, and how it meets the recipe's criteria.

AICR derives ``predicate.fingerprint`` from the snapshot's measurements (``pkg/fingerprint``,
not in the reference material beyond AICR.md §2/§4.2 and the example bundle), so the rules here
are the example bundle's plus the readings AICR's snapshot redaction keeps:

- ``k8sVersion`` ← ``K8s.server.version`` without its ``v`` and any vendor suffix
  (``v1.33.5-eks-113cf36`` → ``1.33.5``), source ``k8s.server.version`` (as in the example);
- ``os`` ← ``OS.release.ID`` / ``VERSION_ID``, source ``os.release`` (as in the example);
- ``gpuModel`` ← ``GPU.hardware.model``; ``accelerator`` ← the criteria value that model names
  (``NVIDIA H100 80GB HBM3`` → ``h100``);
- ``service`` ← ``K8s.node.provider`` when it names a service (``aws`` → ``eks`` …);
- ``nodeCount`` ← ``NodeTopology.summary.node-count``; ``gpuNodeCount`` ← the nodes labelled
  ``nvidia.com/gpu.present=true`` in ``NodeTopology.label``;
- ``region``: no reading carries it, so it is always empty.

A value the snapshot does not give is ``""`` / ``0`` without a source, as in the example.
Each dimension of the criteria match is ``matched`` when the recipe requires nothing (or
``any``) or the fingerprint provides the same value, ``unknown`` when the fingerprint does not
provide it (intent and platform never are), else ``mismatched``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

DIMENSIONS = ("service", "accelerator", "os", "intent", "platform", "nodes")
# Longest names first: "GB200" must not read as "B200".
_ACCELERATORS = (
    ("rtx-pro-6000", re.compile(r"RTX\s*PRO\s*6000", re.I)),
    ("gb300", re.compile(r"\bGB300\b", re.I)),
    ("gb200", re.compile(r"\bGB200\b", re.I)),
    ("vr200", re.compile(r"\bVR200\b", re.I)),
    ("b200", re.compile(r"\bB200\b", re.I)),
    ("h200", re.compile(r"\bH200\b", re.I)),
    ("h100", re.compile(r"\bH100\b", re.I)),
    ("a100", re.compile(r"\bA100\b", re.I)),
    ("l40s", re.compile(r"\bL40S\b", re.I)),
)
_PROVIDERS = {
    "aws": "eks",
    "eks": "eks",
    "gce": "gke",
    "gcp": "gke",
    "gke": "gke",
    "azure": "aks",
    "aks": "aks",
    "oci": "oke",
    "oke": "oke",
}
_K8S_VERSION = re.compile(r"v?(\d+\.\d+\.\d+)")
_GPU_PRESENT_LABEL = "nvidia.com/gpu.present"


def _data(snapshot: Mapping[str, Any], mtype: str, subtype: str) -> Mapping[str, Any]:
    measurements = snapshot.get("measurements")
    for measurement in measurements if isinstance(measurements, list) else []:
        if not isinstance(measurement, Mapping) or measurement.get("type") != mtype:
            continue
        subtypes = measurement.get("subtypes")
        for item in subtypes if isinstance(subtypes, list) else []:
            if isinstance(item, Mapping) and item.get("subtype") == subtype:
                data = item.get("data")
                if isinstance(data, Mapping):
                    return data
    return {}


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _count(value: object) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return max(value, 0)
    if isinstance(value, str) and value.isdigit() and len(value) <= 9:
        return int(value)
    return 0


def accelerator_of(model: str) -> str:
    for name, pattern in _ACCELERATORS:
        if pattern.search(model):
            return name
    return ""


def _gpu_nodes(label_data: Mapping[str, Any]) -> int:
    # NodeTopology.label readings are "value|node1,node2,…".
    value, _, nodes = _text(label_data.get(_GPU_PRESENT_LABEL)).partition("|")
    if value != "true" or not nodes:
        return 0
    return len([n for n in nodes.split(",") if n])


def _entry(value: Any, source: str) -> dict[str, Any]:
    return {"source": source, "value": value} if value else {"value": value}


def fingerprint_of(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """``predicate.fingerprint`` from a (full or redacted) snapshot document."""
    server = _data(snapshot, "K8s", "server")
    release = _data(snapshot, "OS", "release")
    hardware = _data(snapshot, "GPU", "hardware")
    node = _data(snapshot, "K8s", "node")
    summary = _data(snapshot, "NodeTopology", "summary")
    labels = _data(snapshot, "NodeTopology", "label")

    version = _K8S_VERSION.match(_text(server.get("version")))
    model = _text(hardware.get("model"))
    accelerator = accelerator_of(model)
    service = _PROVIDERS.get(_text(node.get("provider")).lower(), "")
    os_entry: dict[str, Any] = _entry(_text(release.get("ID")), "os.release")
    if _text(release.get("VERSION_ID")):
        os_entry["version"] = _text(release.get("VERSION_ID"))
    return {
        "accelerator": _entry(accelerator, "gpu.hardware.model"),
        "gpuModel": _entry(model, "gpu.hardware.model"),
        "gpuNodeCount": _entry(_gpu_nodes(labels), "nodetopology.label"),
        "k8sVersion": _entry(version.group(1) if version else "", "k8s.server.version"),
        "nodeCount": _entry(_count(summary.get("node-count")), "nodetopology.summary"),
        "os": os_entry,
        "region": {"value": ""},
        "service": _entry(service, "k8s.node.provider"),
    }


def _provided(fingerprint: Mapping[str, Any], dimension: str) -> str:
    if dimension == "nodes":
        count = fingerprint.get("nodeCount", {}).get("value", 0)
        return str(count) if count else ""
    if dimension in ("service", "accelerator", "os"):
        return _text(fingerprint.get(dimension, {}).get("value"))
    return ""  # intent and platform are not measurable


def criteria_match(criteria: Mapping[str, Any], fingerprint: Mapping[str, Any]) -> dict[str, Any]:
    """``predicate.criteriaMatch`` for the recipe's criteria against the fingerprint."""
    per_dimension = []
    for dimension in DIMENSIONS:
        raw = criteria.get(dimension)
        requires = "" if raw in (None, "", 0) else str(raw)
        provides = _provided(fingerprint, dimension)
        if requires in ("", "any"):
            match = "matched"
        elif not provides:
            match = "unknown"
        elif dimension == "nodes":
            match = "matched" if int(provides) >= _count(requires) else "mismatched"
        else:
            match = "matched" if provides == requires else "mismatched"
        entry: dict[str, Any] = {"dimension": dimension, "match": match}
        if requires:
            entry["recipeRequires"] = requires
        if provides:
            entry["fingerprintProvides"] = provides
        per_dimension.append(entry)
    return {
        "matched": all(e["match"] != "mismatched" for e in per_dimension),
        "perDimension": per_dimension,
    }
