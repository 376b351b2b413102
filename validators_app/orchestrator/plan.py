"""The cluster objects of a run, rendered exactly as AICR renders them (§2, §4, §5).

Pure functions returning JSON-ready dicts; ``run.py`` sends them. Key order follows AICR's
rendered example so a diff against ``kubectl get -o yaml`` reads naturally.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .images import pull_policy, resolve_image
from .model import CheckInputs

__all__ = [
    "CatalogEntry",
    "PreflightError",
    "Scheduling",
    "catalog_entries",
    "go_duration",
    "job_name",
    "parse_go_duration",
    "render_job",
    "select_checks",
]

MANAGER = "aicr"
_NAME = {"app.kubernetes.io/name": "aicr"}
_COMPONENT = {"app.kubernetes.io/component": "validation"}
_MANAGED = {"app.kubernetes.io/managed-by": "aicr"}
_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_RUN_ID = re.compile(r"^\d{8}-\d{6}-[0-9a-f]{16}$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
DEFAULT_TIMEOUT_S = 300
# Check-scoped variables AICR forwards from the CLI environment and refuses from the catalog.
_FORWARDED = frozenset(
    {
        "HF_TOKEN",
        "AICR_REQUIRE_SCOPED_INFERENCE_GATEWAY",
        "AICR_NCCL_FABRIC",
        "AICR_INFERENCE_PERF_NO_CLEANUP",
    }
)


class PreflightError(ValueError):
    """A declared check or a required dependency cannot be planned (exit 2 in AICR, no CTRF)."""


def valid_run_id(run_id: str) -> bool:
    return bool(_RUN_ID.match(run_id))


def parse_go_duration(text: str) -> float:
    """Go ``time.ParseDuration`` for the catalog's timeouts (``2m``, ``1h5m``, ``90s``)."""
    s = str(text).strip()
    if s in ("0", ""):
        return 0.0
    pos, total = 0, 0.0
    for m in _DURATION_PART.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT_S[m.group(2)]
        pos = m.end()
    if pos != len(s):
        raise ValueError(f"invalid duration {text!r}")
    return total


def go_duration(seconds: float) -> str:
    """Go ``Duration.String()`` for whole seconds: ``2m0s``, ``8m0s``, ``1h5m0s``, ``45s``."""
    total = int(seconds)
    if total == 0:
        return "0s"
    h, rem = divmod(total, 3600)
    m, s = divmod(rem, 60)
    if h:
        return f"{h}h{m}m{s}s"
    if m:
        return f"{m}m{s}s"
    return f"{s}s"


def job_name(run_id: str, check: str) -> str:
    """``aicr-<check>-<8 hex>`` from sha256(run_id/check): a resumed run finds its Job."""
    digest = hashlib.sha256(f"{run_id}/{check}".encode()).hexdigest()[:8]
    name = f"aicr-{check}-{digest}"
    if len(name) > 63 or not _DNS1123.match(check):
        raise PreflightError(f"check name {check!r} cannot form a Job name (DNS-1123, ≤63 chars)")
    return name


@dataclass(frozen=True)
class CatalogEntry:
    name: str
    phase: str
    image: str
    timeout_s: float
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    resources: Mapping[str, str] | None
    dependency_affinity: tuple[Mapping[str, Any], ...]

    @property
    def deadline_s(self) -> int:
        return int(self.timeout_s) or DEFAULT_TIMEOUT_S


def catalog_entries(catalog: Mapping[str, Any]) -> list[CatalogEntry]:
    entries = []
    for raw in catalog.get("validators") or ():
        if not isinstance(raw, Mapping):
            continue
        env = tuple(
            (str(e.get("name")), str(e.get("value", "")))
            for e in raw.get("env") or ()
            if isinstance(e, Mapping)
        )
        resources = raw.get("resources") if isinstance(raw.get("resources"), Mapping) else None
        entries.append(
            CatalogEntry(
                name=str(raw.get("name", "")),
                phase=str(raw.get("phase", "")),
                image=str(raw.get("image", "")),
                timeout_s=parse_go_duration(raw.get("timeout") or "0"),
                args=tuple(str(a) for a in raw.get("args") or ()),
                env=env,
                resources=resources,
                dependency_affinity=tuple(
                    d for d in raw.get("dependencyAffinity") or () if isinstance(d, Mapping)
                ),
            )
        )
    return entries


def declared_checks(recipe: Mapping[str, Any], phase: str) -> list[str]:
    section = (recipe.get("validation") or {}).get(phase) or {}
    return [str(c) for c in section.get("checks") or ()] if isinstance(section, Mapping) else []


def _components(recipe: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {
        str(c.get("name")): c for c in recipe.get("componentRefs") or () if isinstance(c, Mapping)
    }


def select_checks(
    recipe: Mapping[str, Any], catalog: Sequence[CatalogEntry], phase: str
) -> list[CatalogEntry]:
    """preflightDeclaredChecks + FilterEntriesByValidation: catalog order, each declared once.

    A ``required`` dependency affinity whose component is missing from the recipe fails the
    phase pre-flight (AICR-VALIDATE.md §5).
    """
    declared = declared_checks(recipe, phase)
    in_phase = [e for e in catalog if e.phase == phase]
    for name in declared:
        count = sum(1 for e in in_phase if e.name == name)
        if count != 1:
            reason = "not found" if count == 0 else f"defined {count} times"
            raise PreflightError(
                f"declared {phase} check {name!r} is {reason} in the validator catalog"
            )
    if len(set(declared)) != len(declared):
        raise PreflightError(f"{phase} checks declare the same check more than once: {declared}")
    selected = [e for e in in_phase if e.name in declared]
    components = _components(recipe)
    for entry in selected:
        for dep in entry.dependency_affinity:
            if (
                dep.get("requirement") == "required"
                and str(dep.get("componentRef")) not in components
            ):
                raise PreflightError(
                    f"check {entry.name!r} requires component {dep.get('componentRef')!r}, "
                    "which the recipe does not declare"
                )
        for env_name, _ in entry.env:
            if env_name in _FORWARDED:
                raise PreflightError(f"catalog entry {entry.name!r} may not set {env_name}")
    return selected


@dataclass(frozen=True)
class ImageSettings:
    version: str
    commit: str = ""
    registry: str = ""
    tag: str = ""

    def resolve(self, image: str) -> str:
        """``image`` as a Job of this run names it (``images.resolve_image``)."""
        return resolve_image(
            image,
            aicr_version=self.version,
            aicr_commit=self.commit,
            image_registry=self.registry,
            image_tag=self.tag,
        )


def _affinity(entry: CatalogEntry, recipe: Mapping[str, Any]) -> dict[str, Any]:
    affinity: dict[str, Any] = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "preference": {
                        "matchExpressions": [
                            {"key": "nvidia.com/gpu.present", "operator": "DoesNotExist"}
                        ]
                    },
                }
            ]
        }
    }
    components = _components(recipe)
    terms = []
    for dep in entry.dependency_affinity:
        component = components.get(str(dep.get("componentRef")))
        if component is None:
            continue  # a missing "preferred" dependency is just omitted
        term = {
            "labelSelector": {"matchLabels": dict(dep.get("podLabelSelector") or {})},
            "namespaces": [str(component.get("namespace", ""))],
            "topologyKey": "kubernetes.io/hostname",
        }
        if dep.get("requirement") == "required":
            affinity.setdefault("podAffinity", {}).setdefault(
                "requiredDuringSchedulingIgnoredDuringExecution", []
            ).append(term)
        else:
            terms.append({"weight": 100, "podAffinityTerm": term})
    if terms:
        affinity.setdefault("podAffinity", {})[
            "preferredDuringSchedulingIgnoredDuringExecution"
        ] = terms
    return affinity


@dataclass(frozen=True)
class Scheduling:
    """What ``aicr validate``'s --image-pull-secret / --node-selector / --toleration and the
    check-scoped environment give each validator Job (AICR-VALIDATE.md §5)."""

    image_pull_secrets: tuple[str, ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    check_inputs: CheckInputs = field(default_factory=CheckInputs)


def node_selector_env(selector: Mapping[str, str]) -> str:
    """AICR_NODE_SELECTOR: ``k1=v1,k2=v2``, keys sorted (AICR's ``serializeNodeSelector``)."""
    return ",".join(f"{key}={selector[key]}" for key in sorted(selector))


def tolerations_env(tolerations: Sequence[Mapping[str, Any]]) -> str:
    """AICR_TOLERATIONS (AICR's ``serializeTolerations``, ``job_plan_internal.go``): ``*`` for an
    empty-key Exists, ``key=value:Effect`` with a value, else ``key:Effect``; the operator and
    tolerationSeconds are not carried, as in AICR."""
    parts = []
    for toleration in tolerations:
        key, value = str(toleration.get("key", "")), str(toleration.get("value", ""))
        effect = str(toleration.get("effect", ""))
        if not key and toleration.get("operator") == "Exists":
            parts.append("*")
        elif value:
            parts.append(f"{key}={value}:{effect}")
        else:
            parts.append(f"{key}:{effect}")
    return ",".join(parts)


def _check_scoped_env(check: str, inputs: CheckInputs) -> list[dict[str, Any]]:
    """The forwards AICR scopes to one check each, in its order (``buildEnv``)."""
    env: list[tuple[str, str]] = []
    if inputs.hf_token and check == "inference-perf":
        env.append(("HF_TOKEN", inputs.hf_token))
    if inputs.require_scoped_inference_gateway and check == "inference-gateway":
        env.append(("AICR_REQUIRE_SCOPED_INFERENCE_GATEWAY", "true"))
    if inputs.nccl_fabric and check == "nccl-all-reduce-bw-net":
        env.append(("AICR_NCCL_FABRIC", inputs.nccl_fabric))
    if inputs.inference_perf_no_cleanup and check == "inference-perf":
        env.append(("AICR_INFERENCE_PERF_NO_CLEANUP", "1"))  # AICR forwards a canonical "1"
    return [{"name": name, "value": value} for name, value in env]


def _env(
    entry: CatalogEntry, run_id: str, images: ImageSettings, scheduling: Scheduling
) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        {"name": "AICR_SNAPSHOT_PATH", "value": "/data/snapshot/snapshot.yaml"},
        {"name": "AICR_VALIDATION_PATH", "value": "/data/validation/validation.yaml"},
        {"name": "AICR_VALIDATOR_NAME", "value": entry.name},
        {"name": "AICR_VALIDATOR_PHASE", "value": entry.phase},
        {"name": "AICR_RUN_ID", "value": run_id},
        {"name": "AICR_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "AICR_CHECK_TIMEOUT", "value": go_duration(entry.deadline_s)},
    ]
    for name, value in (
        ("AICR_NODE_SELECTOR", node_selector_env(scheduling.node_selector)),
        ("AICR_TOLERATIONS", tolerations_env(scheduling.tolerations)),
        ("AICR_CLI_VERSION", images.version),
        ("AICR_CLI_COMMIT", images.commit),
        ("AICR_VALIDATOR_IMAGE_REGISTRY", images.registry),
        ("AICR_VALIDATOR_IMAGE_TAG", images.tag),
    ):
        if value:
            env.append({"name": name, "value": value})
    env.extend(_check_scoped_env(entry.name, scheduling.check_inputs))
    env.extend({"name": n, "value": v} for n, v in entry.env)
    return env


def render_job(
    entry: CatalogEntry,
    *,
    run_id: str,
    namespace: str,
    recipe: Mapping[str, Any],
    images: ImageSettings,
    scheduling: Scheduling | None = None,
) -> dict[str, Any]:
    """RenderPlan for one validator (the §5 example, field for field). ``scheduling`` reaches
    only the pull secrets and the env: the validator pod itself keeps tolerate-all and no
    nodeSelector, as in AICR."""
    scheduling = scheduling or Scheduling()
    name = job_name(run_id, entry.name)
    image = images.resolve(entry.image)  # the same rule the mutable-image refusal reads
    cpu, memory = "1", "1Gi"
    if entry.resources and entry.resources.get("cpu") and entry.resources.get("memory"):
        cpu, memory = str(entry.resources["cpu"]), str(entry.resources["memory"])
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                **_NAME,
                **_COMPONENT,
                **_MANAGED,
                "aicr.run/job-type": "validation",
                "aicr.run/run-id": run_id,
                "aicr.run/validator": entry.name,
                "aicr.run/phase": entry.phase,
            },
        },
        "spec": {
            "activeDeadlineSeconds": entry.deadline_s,
            "backoffLimit": 0,
            "ttlSecondsAfterFinished": 3600,
            "template": {
                "metadata": {"labels": {**_NAME, **_COMPONENT, "aicr.run/validator": entry.name}},
                "spec": {
                    "serviceAccountName": f"aicr-validator-{run_id}",
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 30,
                    "imagePullSecrets": [
                        {"name": secret} for secret in scheduling.image_pull_secrets
                    ],
                    "tolerations": [{"operator": "Exists"}],
                    "affinity": _affinity(entry, recipe),
                    "containers": [
                        {
                            "name": "validator",
                            "image": image,
                            "imagePullPolicy": pull_policy(image, tag_override=images.tag),
                            "args": list(entry.args),
                            "env": _env(entry, run_id, images, scheduling),
                            "resources": {
                                "requests": {"cpu": cpu, "memory": memory},
                                "limits": {"cpu": cpu, "memory": memory},
                            },
                            "terminationMessagePath": "/dev/termination-log",
                            "terminationMessagePolicy": "File",
                            "volumeMounts": [
                                {
                                    "name": "snapshot",
                                    "mountPath": "/data/snapshot",
                                    "readOnly": True,
                                },
                                {
                                    "name": "validation",
                                    "mountPath": "/data/validation",
                                    "readOnly": True,
                                },
                            ],
                        }
                    ],
                    "volumes": [
                        {"name": "snapshot", "configMap": {"name": f"aicr-snapshot-{run_id}"}},
                        {"name": "validation", "configMap": {"name": f"aicr-validation-{run_id}"}},
                    ],
                },
            },
        },
    }


# --- per-run objects (§4.1, §4.2, §6.1) ---------------------------------------------------


def namespace_body(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": namespace, "labels": {**_NAME, **_COMPONENT, **_MANAGED}},
    }


def _validator_labels() -> dict[str, str]:
    return {"app.kubernetes.io/name": "aicr-validator", **_MANAGED}


def service_account_body(run_id: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {
            "name": f"aicr-validator-{run_id}",
            "namespace": namespace,
            "labels": _validator_labels(),
        },
    }


def cluster_role_binding_body(run_id: str, namespace: str) -> dict[str, Any]:
    name = f"aicr-validator-{run_id}"
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name, "labels": _validator_labels()},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "cluster-admin",
        },
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
    }


def data_config_map(
    name: str, key: str, text: str, *, run_id: str, namespace: str
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {**_NAME, **_COMPONENT, **_MANAGED, "aicr.run/run-id": run_id},
        },
        "data": {key: text},
    }


def ctrf_config_map(report_json: str, *, run_id: str, phase: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": f"aicr-ctrf-{run_id}-{phase}",
            "namespace": namespace,
            "labels": {
                **_NAME,
                **_COMPONENT,
                **_MANAGED,
                "aicr.run/run-id": run_id,
                "aicr.run/phase": phase,
                "aicr.run/report-type": "ctrf",
            },
        },
        "data": {"report.json": report_json},
    }


_PHASE_KEYS = ("readiness", "deployment", "performance", "conformance")
_PHASE_FIELDS = ("timeout", "constraints", "checks", "nodeSelection", "infrastructure")


def validation_input(recipe: Mapping[str, Any], *, gpu_allocation_policy: str) -> dict[str, Any]:
    """ToValidationInput: the document mounted at /data/validation/validation.yaml (§4.2),
    with the policy ``allocation.resolve_gpu_allocation_policy`` resolved from the recipe
    (``conversion.validation_document`` does both, and lowers a runtime ref).

    Go YAML readers ignore key order and unknown keys; empty fields are left out as the Go
    struct's ``omitempty`` tags do.
    """
    metadata = recipe.get("metadata") or {}
    meta: dict[str, Any] = {}
    if isinstance(metadata, Mapping):
        if metadata.get("name"):
            meta["name"] = metadata["name"]
        if metadata.get("version"):
            meta["version"] = metadata["version"]
    validation = recipe.get("validation") or {}
    config: dict[str, Any] = {}
    for phase in _PHASE_KEYS:
        section = validation.get(phase) if isinstance(validation, Mapping) else None
        if isinstance(section, Mapping):
            config[phase] = {k: section[k] for k in _PHASE_FIELDS if section.get(k)}
    doc: dict[str, Any] = {"apiVersion": "validator.nvidia.com/v1alpha1", "kind": "ValidationInput"}
    if meta:
        doc["metadata"] = meta
    if config:
        doc["config"] = config
    for key in ("componentRefs", "criteria", "constraints"):
        if recipe.get(key):
            doc[key] = recipe[key]
    if gpu_allocation_policy:
        doc["gpuAllocationPolicy"] = gpu_allocation_policy
    return doc
