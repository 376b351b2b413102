"""The whole-GPU allocation policy of a recipe (AICR #1327), resolved as ``aicr validate`` does.

Configuration selects the policy, the validator containers verify it against the cluster, and
a contradictory configuration fails closed before any validator Job exists. Written after
AICR's ``pkg/validator/v1/allocation_policy.go`` (``ResolveGPUAllocationPolicy``,
``lookupBoolValueFound``; the version that reads ``nvidia-dra-driver-gpu-ocp`` and refuses two
GPU operators, #1685) and ``pkg/allocpolicy/allocpolicy.go`` (``CheckCoherence``,
``ValidateAdvertiser``, the component and path vocabulary). The messages are AICR's text; AICR
prints them after its error code (``[INVALID_REQUEST] ...``), which runs here leave out, as
they do for readiness messages.

The component values are the hydrated ones (base ``values.yaml`` → ``valuesFile`` →
``overrides``), merged by ``recipes_app.aicrd.hydrate.component_values``: the same merge
``/v1/query``'s hydrated recipes use.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from recipes_app.aicrd.hydrate import ValuesReader, component_values
from recipes_app.resolver.errors import goq
from recipes_app.resolver.model import overrides_enabled

from .model import InvalidRecipeInput

__all__ = [
    "ALLOCATION_POLICIES",
    "POLICY_DEVICE_PLUGIN",
    "POLICY_DRA_EXTENDED_RESOURCE",
    "POLICY_DRA_RESOURCE_CLAIM",
    "POLICY_UNSPECIFIED",
    "AllocationError",
    "Observation",
    "check_coherence",
    "resolve_gpu_allocation_policy",
]

POLICY_UNSPECIFIED = "unspecified"
POLICY_DEVICE_PLUGIN = "device-plugin-extended-resource"  # the production default
POLICY_DRA_RESOURCE_CLAIM = "dra-resource-claim"  # the explicit DRA opt-in
POLICY_DRA_EXTENDED_RESOURCE = "dra-extended-resource"  # reserved (KEP-5004), never resolved
ALLOCATION_POLICIES = (
    POLICY_UNSPECIFIED,
    POLICY_DEVICE_PLUGIN,
    POLICY_DRA_RESOURCE_CLAIM,
    POLICY_DRA_EXTENDED_RESOURCE,
)

ADVERTISER_EXTERNAL = "external"
DRA_DRIVER = "nvidia-dra-driver-gpu"
DRA_DRIVER_OCP = "nvidia-dra-driver-gpu-ocp"
GPU_OPERATOR = "gpu-operator"
GPU_OPERATOR_OCP = "gpu-operator-ocp"
PATH_DRA_GPUS_ENABLED = "resources.gpus.enabled"
PATH_DRA_GPUS_OVERRIDE = "gpuResourcesEnabledOverride"
PATH_DEVICE_PLUGIN_ENABLED = "devicePlugin.enabled"
_ISSUE = "(issue #1327)"


class AllocationError(InvalidRecipeInput):
    """AICR's ``ErrCodeInvalidRequest``: the recipe's allocation configuration is invalid."""


@dataclass(frozen=True)
class Observation:
    """``allocpolicy.Observation``: the effective advertiser tuple; ``None`` = no reading
    (the component is absent or disabled)."""

    advertiser: str = ""
    device_plugin_enabled: bool | None = None
    dra_gpus_enabled: bool | None = None
    dra_gpus_override: bool | None = None
    gpu_operator_component: str = GPU_OPERATOR  # diagnostics only: named in the guidance


def validate_advertiser(advertiser: object) -> None:
    if advertiser not in ("", ADVERTISER_EXTERNAL):
        raise AllocationError(
            f"unknown advertiser {goq(advertiser)}; the only supported value is "
            f"{goq(ADVERTISER_EXTERNAL)}"
        )


def check_coherence(o: Observation) -> None:
    """``allocpolicy.CheckCoherence``: the one evaluator of the #1327 tuple rules."""
    validate_advertiser(o.advertiser)
    device_plugin = o.device_plugin_enabled is True
    gpus = o.dra_gpus_enabled is True
    waiver = o.dra_gpus_override is True
    operator = o.gpu_operator_component or GPU_OPERATOR
    if o.advertiser == ADVERTISER_EXTERNAL:
        if device_plugin:
            raise AllocationError(
                'advertiser "external" conflicts with devicePlugin.enabled=true: the external '
                "advertiser and the GPU operator's device plugin would both advertise "
                "nvidia.com/gpu"
            )
        if gpus:
            raise AllocationError(
                'advertiser "external" conflicts with DRA resources.gpus.enabled=true: the '
                "external advertiser and DRA ResourceClaims would both advertise whole GPUs"
            )
        if waiver:
            raise AllocationError(
                f"invalid GPU allocation configuration: {DRA_DRIVER} {PATH_DRA_GPUS_OVERRIDE}=true "
                f"with {PATH_DRA_GPUS_ENABLED}=false is an inert waiver that disarms the upstream "
                f"chart's install-guard tripwire; remove it {_ISSUE}"
            )
        return
    flip_all_three = (
        f"{PATH_DRA_GPUS_ENABLED}=true, {PATH_DRA_GPUS_OVERRIDE}=true, and "
        f"{operator} {PATH_DEVICE_PLUGIN_ENABLED}=false"
    )
    if gpus:
        if not waiver:
            raise AllocationError(
                f"invalid GPU allocation configuration: {DRA_DRIVER} {PATH_DRA_GPUS_ENABLED}=true "
                f"requires {PATH_DRA_GPUS_OVERRIDE}=true — the upstream chart install guard "
                f"rejects this combination; set both in the recipe overlay {_ISSUE}"
            )
        if device_plugin:
            raise AllocationError(
                f"invalid GPU allocation configuration: dual advertisement — {DRA_DRIVER} "
                f"{PATH_DRA_GPUS_ENABLED}=true and {operator} {PATH_DEVICE_PLUGIN_ENABLED}=true "
                "both advertise whole GPUs, risking GPU over-admission; exactly one advertiser "
                f"is required. For the production default set {PATH_DRA_GPUS_ENABLED}=false "
                f"(with {PATH_DRA_GPUS_OVERRIDE}=false); for the experimental DRA opt-in flip "
                f"all three values together: {flip_all_three} {_ISSUE}"
            )
        return
    if not device_plugin:
        raise AllocationError(
            f"invalid GPU allocation configuration: no whole-GPU advertiser — {DRA_DRIVER} "
            f"{PATH_DRA_GPUS_ENABLED} is false/absent, and the device plugin is unavailable "
            f"({GPU_OPERATOR}/{GPU_OPERATOR_OCP} absent or disabled in the recipe, or "
            f"{PATH_DEVICE_PLUGIN_ENABLED}=false); enable exactly one mechanism in the recipe "
            f"overlay {_ISSUE}"
        )
    if waiver:
        raise AllocationError(
            f"invalid GPU allocation configuration: {DRA_DRIVER} {PATH_DRA_GPUS_OVERRIDE}=true "
            f"with {PATH_DRA_GPUS_ENABLED}=false is an inert waiver that disarms the upstream "
            "chart's install-guard tripwire protecting the device-plugin default; set "
            f"{PATH_DRA_GPUS_OVERRIDE}=false for the production default, or — for the "
            f"experimental DRA opt-in — flip all three values together: {flip_all_three} "
            f"{_ISSUE}"
        )


def resolve_gpu_allocation_policy(recipe: Mapping[str, Any], *, read: ValuesReader) -> str:
    """``ResolveGPUAllocationPolicy``: ``dra-resource-claim`` when the enabled DRA driver pins
    ``resources.gpus.enabled=true``, else ``device-plugin-extended-resource``; raises
    ``AllocationError`` with AICR's message for a contradictory or malformed configuration.

    ``read`` gives a catalog values file by path (``None`` when absent), as hydration needs.
    """
    metadata = recipe.get("metadata")
    profile = metadata.get("selectedProfile") if isinstance(metadata, Mapping) else None
    advertiser = profile.get("advertiser", "") if isinstance(profile, Mapping) else ""
    validate_advertiser(advertiser)

    refs = _enabled_refs(recipe)
    gpus_enabled = override_waiver = False
    dra = refs.get(DRA_DRIVER) or refs.get(DRA_DRIVER_OCP)  # the generic driver wins if both
    if dra is not None:
        name = str(dra["name"])
        values = _values(dra, read)
        found = _lookup_bool(values, name, PATH_DRA_GPUS_ENABLED)
        if found is None:
            raise AllocationError(
                f"invalid GPU allocation configuration: component {goq(name)} is enabled but "
                f"{goq(PATH_DRA_GPUS_ENABLED)} is not set — the upstream chart's declared default "
                "(true) would diverge from the resolved allocation policy at deploy time; pin "
                f"the value explicitly in the recipe {_ISSUE}"
            )
        gpus_enabled = found
        override_waiver = _lookup_bool(values, name, PATH_DRA_GPUS_OVERRIDE) is True

    if GPU_OPERATOR in refs and GPU_OPERATOR_OCP in refs:
        raise AllocationError(
            f"invalid GPU allocation configuration: components {goq(GPU_OPERATOR)} and "
            f"{goq(GPU_OPERATOR_OCP)} are both enabled — two GPU operators collide at the "
            f"operand level; enable exactly one (OpenShift recipes disable {goq(GPU_OPERATOR)} "
            f"and carry {goq(GPU_OPERATOR_OCP)}) (issue #1685)"
        )
    operator_name = GPU_OPERATOR_OCP if GPU_OPERATOR_OCP in refs else GPU_OPERATOR
    device_plugin = False
    operator = refs.get(operator_name)
    if operator is not None:
        # An absent key is the upstream chart default (true), which AICR's values pin anyway.
        reading = _lookup_bool(_values(operator, read), operator_name, PATH_DEVICE_PLUGIN_ENABLED)
        device_plugin = reading is not False

    if advertiser == ADVERTISER_EXTERNAL:
        # A declared external advertiser is THE advertiser; the policy names the request
        # mechanism (nvidia.com/gpu through a device plugin), not who runs the plugin.
        check_coherence(
            Observation(
                advertiser=ADVERTISER_EXTERNAL,
                device_plugin_enabled=device_plugin,
                dra_gpus_enabled=gpus_enabled,
                dra_gpus_override=override_waiver if dra is not None else None,
            )
        )
        return POLICY_DEVICE_PLUGIN
    check_coherence(
        Observation(
            device_plugin_enabled=device_plugin,
            dra_gpus_enabled=gpus_enabled if dra is not None else None,
            dra_gpus_override=override_waiver if dra is not None else None,
            gpu_operator_component=operator_name,
        )
    )
    return POLICY_DRA_RESOURCE_CLAIM if gpus_enabled else POLICY_DEVICE_PLUGIN


def _enabled_refs(recipe: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """``enabledComponentRef`` for every name: the first componentRef of each name
    (``GetComponentRef``), kept only when enabled — a disabled component is not deployed, so
    its values select nothing."""
    first: dict[str, Mapping[str, Any]] = {}
    for ref in recipe.get("componentRefs") or ():
        if isinstance(ref, Mapping) and isinstance(ref.get("name"), str):
            first.setdefault(ref["name"], ref)
    return {
        name: ref
        for name, ref in first.items()
        if overrides_enabled(o if isinstance(o := ref.get("overrides"), Mapping) else None)
    }


def _values(ref: Mapping[str, Any], read: ValuesReader) -> dict[str, Any]:
    try:
        return component_values(ref, read=read)
    except LookupError as exc:  # a valuesFile the catalog does not hold: AICR fails too
        raise AllocationError(
            f"cannot resolve the GPU allocation policy: {exc.args[0] if exc.args else exc}"
        ) from None


def _lookup_bool(values: Mapping[str, Any], component: str, path: str) -> bool | None:
    """``lookupBoolValueFound``: the boolean at ``path``, ``None`` when any segment is absent
    or null; a segment that is not a map, or a leaf that is not a boolean, is an error."""
    parts = path.split(".")
    current: Any = values
    for i, part in enumerate(parts):
        if not isinstance(current, Mapping):
            raise AllocationError(
                f"component {goq(component)} value {goq(path)}: segment "
                f"{goq('.'.join(parts[:i]))} is not a map — cannot resolve the GPU allocation "
                "policy from a malformed value"
            )
        current = current.get(part)
        if current is None:
            return None
    if not isinstance(current, bool):
        raise AllocationError(
            f"component {goq(component)} value {goq(path)} must be a boolean, got "
            f"{_go_type(current)} — cannot resolve the GPU allocation policy from a malformed "
            "value"
        )
    return current


def _go_type(value: object) -> str:
    """Go's ``%T`` for what yaml.v3 decodes into ``map[string]any``."""
    if isinstance(value, str):
        return "string"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, list | tuple):
        return "[]interface {}"
    if isinstance(value, Mapping):
        return "map[string]interface {}"
    return type(value).__name__
