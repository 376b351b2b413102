"""The identity tuple a qualification covers, read from a snapshot, and how two tuples compare.

AICR's support policy: a qualification covers exact identities and stops applying when any of
them changes. These are the identities a snapshot can carry (AICR.md §2 readings); each is
``None`` when the document does not record it, and an unrecorded identity is never a match
(``unknown``), only "not recorded". Values are normalised only where AICR itself treats two
spellings as one (``v1.33.5-eks-113cf36`` is Kubernetes ``1.33.5``).

Plain Python (no Django), so the CLI, the API and the bench share it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# (key, label) in the order pages show them.
IDENTITIES: tuple[tuple[str, str], ...] = (
    ("k8s_version", "Kubernetes version"),
    ("os", "OS"),
    ("os_version", "OS version"),
    ("kernel", "kernel"),
    ("gpu_model", "GPU model"),
    ("gpu_count", "GPU count"),
    ("driver", "GPU driver"),
    ("gpu_operator", "GPU Operator"),
    ("dra_driver", "DRA driver"),
    ("node_image", "node image"),
    ("instance_type", "instance type"),
    ("aicr_version", "AICR version"),
)
LABELS = dict(IDENTITIES)
NOT_INSTALLED = "not installed"
_K8S_VERSION = re.compile(r"v?(\d+\.\d+\.\d+)")
_INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"


def _subtypes(snapshot: Mapping[str, Any], mtype: str) -> list[Mapping[str, Any]]:
    measurements = snapshot.get("measurements")
    for m in measurements if isinstance(measurements, list) else ():
        if isinstance(m, Mapping) and m.get("type") == mtype:
            subtypes = m.get("subtypes")
            if not isinstance(subtypes, list):
                return []
            return [s for s in subtypes if isinstance(s, Mapping)]
    return []


def _data(snapshot: Mapping[str, Any], mtype: str, subtype: str) -> Mapping[str, Any] | None:
    for s in _subtypes(snapshot, mtype):
        if s.get("subtype") == subtype:
            data = s.get("data")
            return data if isinstance(data, Mapping) else {}
    return None


def _scalar(value: object) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int | float | str) and str(value).strip():
        return str(value).strip()
    return None


def _reading(data: Mapping[str, Any] | None, key: str) -> str | None:
    return _scalar(data.get(key)) if data is not None else None


def _k8s_version(text: str | None) -> str | None:
    match = _K8S_VERSION.match(text or "")
    return match.group(1) if match else None


def _component(
    helm: Mapping[str, Any] | None, images: Mapping[str, Any] | None, name: str
) -> str | None:
    """A component's version from the Helm releases or images, ``NOT_INSTALLED`` when the
    snapshot lists components without it, ``None`` when it lists none at all."""
    if helm is None and images is None:
        return None
    version = _reading(helm, f"{name}.version") or _reading(images, name)
    if version:
        return version
    if (helm is not None and f"{name}.chart" in helm) or (images is not None and name in images):
        return "installed (version not recorded)"
    return NOT_INSTALLED


def _instance_type(labels: Mapping[str, Any] | None) -> str | None:
    # NodeTopology.label readings are "value|node,node" (several values joined by "; ").
    text = _reading(labels, _INSTANCE_TYPE_LABEL)
    if not text:
        return None
    values = sorted({part.split("|", 1)[0].strip() for part in text.split(";") if part.strip()})
    return ",".join(v for v in values if v) or None


def identity_of(snapshot: Mapping[str, Any], *, aicr_version: str = "") -> dict[str, str | None]:
    """Every identity of ``IDENTITIES`` the snapshot records (``None`` where it does not).

    ``aicr_version`` overrides the snapshot header's ``metadata.version`` (evidence carries
    the AICR version in its predicate).
    """
    server = _data(snapshot, "K8s", "server")
    node = _data(snapshot, "K8s", "node")
    helm = _data(snapshot, "K8s", "helm")
    images = _data(snapshot, "K8s", "image")
    policy = _data(snapshot, "K8s", "policy")
    release = _data(snapshot, "OS", "release")
    sysctl = _data(snapshot, "OS", "sysctl")
    hardware = _data(snapshot, "GPU", "hardware")
    labels = _data(snapshot, "NodeTopology", "label")
    metadata = snapshot.get("metadata")
    header_version = _scalar(metadata.get("version")) if isinstance(metadata, Mapping) else None
    return {
        "k8s_version": _k8s_version(_reading(server, "version")),
        "os": _reading(release, "ID"),
        "os_version": _reading(release, "VERSION_ID"),
        "kernel": _reading(sysctl, "/proc/sys/kernel/osrelease")
        or _reading(node, "kernel-version"),
        "gpu_model": _reading(hardware, "model"),
        "gpu_count": _reading(hardware, "gpu-count"),
        "driver": _reading(policy, "driver.version") or _reading(images, "nvidia-driver"),
        "gpu_operator": _component(helm, images, "gpu-operator"),
        "dra_driver": _component(helm, images, "nvidia-dra-driver-gpu"),
        "node_image": _reading(node, "os-image"),
        "instance_type": _instance_type(labels),
        "aicr_version": aicr_version.strip() or header_version,
    }


def identity_from_fingerprint(
    fingerprint: Mapping[str, Any], *, aicr_version: str = ""
) -> dict[str, str | None]:
    """What a predicate's ``fingerprint`` alone records (evidence without a snapshot file)."""

    def value(name: str, key: str = "value") -> str | None:
        entry = fingerprint.get(name)
        return _scalar(entry.get(key)) if isinstance(entry, Mapping) else None

    # gpuNodeCount is a node count, not the GPUs per node a snapshot's gpu-count reads: unused.
    identity: dict[str, str | None] = dict.fromkeys(LABELS)
    identity.update(
        k8s_version=_k8s_version(value("k8sVersion")),
        os=value("os"),
        os_version=value("os", "version"),
        gpu_model=value("gpuModel"),
        aicr_version=aicr_version.strip() or None,
    )
    return identity


def merged(
    primary: Mapping[str, str | None], fallback: Mapping[str, str | None]
) -> dict[str, str | None]:
    """``primary``'s readings, ``fallback``'s where ``primary`` records nothing."""
    return {key: primary.get(key) or fallback.get(key) for key in LABELS}


@dataclass(frozen=True)
class Comparison:
    matches: list[str]
    differs: list[str]
    not_recorded: list[str]  # the snapshot records it, the evidence does not
    not_in_snapshot: list[str]  # the evidence records it, the snapshot does not
    neither: list[str]  # recorded by neither side: not part of either tuple


def compare(cluster: Mapping[str, str | None], evidence: Mapping[str, str | None]) -> Comparison:
    """Identity by identity: equal, different, or recorded on one side only (never a match)."""
    c = Comparison([], [], [], [], [])
    for key in LABELS:
        mine, theirs = cluster.get(key), evidence.get(key)
        if mine is None and theirs is None:
            c.neither.append(key)
        elif theirs is None:
            c.not_recorded.append(key)
        elif mine is None:
            c.not_in_snapshot.append(key)
        else:
            (c.matches if mine == theirs else c.differs).append(key)
    return c
