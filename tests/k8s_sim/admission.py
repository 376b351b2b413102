"""What the API server does to an object before storing it: defaulting (Jobs, pods), the
server-side-apply merge and ``managedFields`` bookkeeping."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from .store import Resource, now_rfc3339


def default_object(resource: Resource, obj: dict[str, Any], uid: str | None = None) -> None:
    if resource.plural == "jobs":
        spec = obj.setdefault("spec", {})
        spec.setdefault("parallelism", 1)
        spec.setdefault("completions", 1)
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("completionMode", "NonIndexed")
        spec.setdefault("suspend", False)
        spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
        name = obj["metadata"].get("name", "")
        if uid:
            spec.setdefault(
                "selector", {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
            )
        template = spec.setdefault("template", {})
        labels = template.setdefault("metadata", {}).setdefault("labels", {})
        if uid:
            labels.update({"batch.kubernetes.io/controller-uid": uid, "controller-uid": uid})
        labels.update({"batch.kubernetes.io/job-name": name, "job-name": name})
        _default_pod_spec(template.setdefault("spec", {}))
    elif resource.plural == "pods":
        _default_pod_spec(obj.setdefault("spec", {}))


def _default_pod_spec(spec: dict[str, Any]) -> None:
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    spec.setdefault("terminationGracePeriodSeconds", 30)
    for container in spec.get("containers") or []:
        image = str(container.get("image", ""))
        tagged = ":" in image.rsplit("/", 1)[-1] or "@" in image
        pull = "Always" if (not tagged or image.endswith(":latest")) else "IfNotPresent"
        container.setdefault("imagePullPolicy", pull)
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
        container.setdefault("resources", {})


def apply_merge(base: dict[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """Apply-style merge: maps merge recursively, lists and scalars replace, null deletes."""
    for key, value in patch.items():
        if value is None:
            base.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(base.get(key), dict):
            apply_merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def leaves(obj: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(obj, Mapping):
        out: dict[str, Any] = {}
        for key, value in obj.items():
            out.update(leaves(value, f"{prefix}.{key}"))
        return out
    return {prefix: obj}


def record_manager(obj: dict[str, Any], manager: str, operation: str) -> None:
    entries = [
        entry
        for entry in obj["metadata"].get("managedFields") or []
        if not (entry.get("manager") == manager and entry.get("operation") == operation)
    ]
    entries.append(
        {
            "manager": manager,
            "operation": operation,
            "apiVersion": obj["apiVersion"],
            "time": now_rfc3339(),
            "fieldsType": "FieldsV1",
            "fieldsV1": {},
        }
    )
    obj["metadata"]["managedFields"] = entries


def fresh_managed_fields(
    obj: dict[str, Any], resource: Resource, manager: str, operation: str
) -> None:
    obj["apiVersion"], obj["kind"] = resource.api_version, resource.kind
    obj["metadata"]["managedFields"] = []
    record_manager(obj, manager, operation)
