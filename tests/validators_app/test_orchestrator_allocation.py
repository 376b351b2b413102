"""The GPU allocation policy as ``aicr validate`` resolves it (AICR #1327): the coherence table
of ``pkg/allocpolicy``, the hydrated values it reads, AICR's messages word for word, and every
recipe of the real catalog."""

from __future__ import annotations

import collections
from collections.abc import Mapping
from typing import Any

import pytest
import yaml

from recipes_app import services as recipe_services
from recipes_app.models import Catalog, Recipe
from recipes_app.resolver.model import overrides_enabled
from validators_app.orchestrator import CatalogData, InvalidRecipeInput, validation_document
from validators_app.orchestrator.allocation import (
    POLICY_DEVICE_PLUGIN,
    POLICY_DRA_RESOURCE_CLAIM,
    resolve_gpu_allocation_policy,
)

DRA = "nvidia-dra-driver-gpu"
OP = "gpu-operator"
OCP = "gpu-operator-ocp"

# AICR's texts (pkg/allocpolicy/allocpolicy.go, pkg/validator/v1/allocation_policy.go).
CHART_GUARD = (
    "invalid GPU allocation configuration: nvidia-dra-driver-gpu resources.gpus.enabled=true "
    "requires gpuResourcesEnabledOverride=true — the upstream chart install guard rejects this "
    "combination; set both in the recipe overlay (issue #1327)"
)
NO_ADVERTISER = (
    "invalid GPU allocation configuration: no whole-GPU advertiser — nvidia-dra-driver-gpu "
    "resources.gpus.enabled is false/absent, and the device plugin is unavailable "
    "(gpu-operator/gpu-operator-ocp absent or disabled in the recipe, or "
    "devicePlugin.enabled=false); enable exactly one mechanism in the recipe overlay "
    "(issue #1327)"
)


def dual(operator: str) -> str:
    return (
        "invalid GPU allocation configuration: dual advertisement — nvidia-dra-driver-gpu "
        f"resources.gpus.enabled=true and {operator} devicePlugin.enabled=true both advertise "
        "whole GPUs, risking GPU over-admission; exactly one advertiser is required. For the "
        "production default set resources.gpus.enabled=false (with "
        "gpuResourcesEnabledOverride=false); for the experimental DRA opt-in flip all three "
        "values together: resources.gpus.enabled=true, gpuResourcesEnabledOverride=true, and "
        f"{operator} devicePlugin.enabled=false (issue #1327)"
    )


INERT_WAIVER = (
    "invalid GPU allocation configuration: nvidia-dra-driver-gpu gpuResourcesEnabledOverride=true "
    "with resources.gpus.enabled=false is an inert waiver that disarms the upstream chart's "
    "install-guard tripwire protecting the device-plugin default; set "
    "gpuResourcesEnabledOverride=false for the production default, or — for the experimental "
    "DRA opt-in — flip all three values together: resources.gpus.enabled=true, "
    "gpuResourcesEnabledOverride=true, and gpu-operator devicePlugin.enabled=false (issue #1327)"
)
UNSET_SWITCH = (
    'invalid GPU allocation configuration: component "nvidia-dra-driver-gpu" is enabled but '
    '"resources.gpus.enabled" is not set — the upstream chart\'s declared default (true) would '
    "diverge from the resolved allocation policy at deploy time; pin the value explicitly in "
    "the recipe (issue #1327)"
)
TWO_OPERATORS = (
    'invalid GPU allocation configuration: components "gpu-operator" and "gpu-operator-ocp" are '
    "both enabled — two GPU operators collide at the operand level; enable exactly one "
    '(OpenShift recipes disable "gpu-operator" and carry "gpu-operator-ocp") (issue #1685)'
)
EXTERNAL_PLUGIN = (
    'advertiser "external" conflicts with devicePlugin.enabled=true: the external advertiser '
    "and the GPU operator's device plugin would both advertise nvidia.com/gpu"
)
EXTERNAL_DRA = (
    'advertiser "external" conflicts with DRA resources.gpus.enabled=true: the external '
    "advertiser and DRA ResourceClaims would both advertise whole GPUs"
)
EXTERNAL_WAIVER = (
    "invalid GPU allocation configuration: nvidia-dra-driver-gpu gpuResourcesEnabledOverride=true "
    "with resources.gpus.enabled=false is an inert waiver that disarms the upstream chart's "
    "install-guard tripwire; remove it (issue #1327)"
)


def ref(name: str, **overrides: Any) -> dict[str, Any]:
    return {"name": name, "type": "Helm", "overrides": overrides}


def dra(gpus: object = False, waiver: object = False, **more: Any) -> dict[str, Any]:
    return ref(
        DRA, resources={"gpus": {"enabled": gpus}}, gpuResourcesEnabledOverride=waiver, **more
    )


def operator(name: str = OP, device_plugin: object = True, **more: Any) -> dict[str, Any]:
    return ref(name, devicePlugin={"enabled": device_plugin}, **more)


def recipe(*refs: Mapping[str, Any], advertiser: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"version": "dev"}
    if advertiser is not None:
        metadata["selectedProfile"] = {"name": "gpuStack", "advertiser": advertiser}
    return {"metadata": metadata, "componentRefs": list(refs)}


def no_files(path: str) -> Any:
    return None


def resolve(doc: Mapping[str, Any], read: Any = no_files) -> str:
    return resolve_gpu_allocation_policy(doc, read=read)


CASES: list[tuple[str, dict[str, Any], str]] = [
    # (case, recipe, the policy or "!" + AICR's message)
    ("production default", recipe(dra(), operator()), POLICY_DEVICE_PLUGIN),
    ("DRA opt-in: all three flipped", recipe(dra(True, True), operator(device_plugin=False)),
     POLICY_DRA_RESOURCE_CLAIM),
    ("DRA driver absent, device plugin on", recipe(operator()), POLICY_DEVICE_PLUGIN),
    ("operator without devicePlugin key: chart default true", recipe(ref(OP)),
     POLICY_DEVICE_PLUGIN),
    ("devicePlugin: null is absent", recipe(ref(OP, devicePlugin=None)), POLICY_DEVICE_PLUGIN),
    ("disabled DRA driver selects nothing", recipe(dra(True, False, enabled=False), operator()),
     POLICY_DEVICE_PLUGIN),
    ("DRA enabled without gpus.enabled", recipe(ref(DRA), operator()), "!" + UNSET_SWITCH),
    ("gpus.enabled=true + override=false", recipe(dra(True, False), operator(device_plugin=False)),
     "!" + CHART_GUARD),
    ("gpus.enabled=true, override absent",
     recipe(ref(DRA, resources={"gpus": {"enabled": True}}), operator(device_plugin=False)),
     "!" + CHART_GUARD),
    ("no advertiser: plugin off, DRA off", recipe(dra(), operator(device_plugin=False)),
     "!" + NO_ADVERTISER),
    ("no advertiser: no operator, no driver", recipe(ref("cert-manager")), "!" + NO_ADVERTISER),
    ("no advertiser: operator disabled", recipe(dra(), operator(enabled=False)),
     "!" + NO_ADVERTISER),
    ("dual advertisement", recipe(dra(True, True), operator()), "!" + dual(OP)),
    ("dual advertisement names the OCP operator",
     recipe(dra(True, True), operator(enabled=False), operator(OCP)), "!" + dual(OCP)),
    ("inert waiver", recipe(dra(False, True), operator()), "!" + INERT_WAIVER),
    ("OCP operator is the advertiser", recipe(dra(), operator(enabled=False), operator(OCP)),
     POLICY_DEVICE_PLUGIN),
    ("OCP DRA driver carries the switch",
     recipe(ref(DRA, enabled=False), ref("nvidia-dra-driver-gpu-ocp",
            resources={"gpus": {"enabled": True}}, gpuResourcesEnabledOverride=True),
            operator(enabled=False), operator(OCP, device_plugin=False)),
     POLICY_DRA_RESOURCE_CLAIM),
    ("two GPU operators", recipe(dra(), operator(), operator(OCP)), "!" + TWO_OPERATORS),
    ("external advertiser", recipe(dra(), operator(device_plugin=False), advertiser="external"),
     POLICY_DEVICE_PLUGIN),
    ("external advertiser without any operator", recipe(advertiser="external"),
     POLICY_DEVICE_PLUGIN),
    ("external + device plugin", recipe(dra(), operator(), advertiser="external"),
     "!" + EXTERNAL_PLUGIN),
    ("external + DRA gpus", recipe(dra(True, True), operator(device_plugin=False),
                                   advertiser="external"), "!" + EXTERNAL_DRA),
    ("external + waiver", recipe(dra(False, True), operator(device_plugin=False),
                                 advertiser="external"), "!" + EXTERNAL_WAIVER),
    ("unknown advertiser", recipe(operator(), advertiser="External"),
     '!unknown advertiser "External"; the only supported value is "external"'),
    ("gpus.enabled as a string", recipe(dra("true", False), operator()),
     '!component "nvidia-dra-driver-gpu" value "resources.gpus.enabled" must be a boolean, got '
     "string — cannot resolve the GPU allocation policy from a malformed value"),
    ("override as an int", recipe(dra(False, 1), operator()),
     '!component "nvidia-dra-driver-gpu" value "gpuResourcesEnabledOverride" must be a boolean, '
     "got int — cannot resolve the GPU allocation policy from a malformed value"),
    ("devicePlugin.enabled as a list", recipe(dra(), operator(device_plugin=["yes"])),
     '!component "gpu-operator" value "devicePlugin.enabled" must be a boolean, got '
     "[]interface {} — cannot resolve the GPU allocation policy from a malformed value"),
    ("a segment that is not a map", recipe(ref(DRA, resources="gpus"), operator()),
     '!component "nvidia-dra-driver-gpu" value "resources.gpus.enabled": segment "resources" is '
     "not a map — cannot resolve the GPU allocation policy from a malformed value"),
]  # fmt: skip


@pytest.mark.parametrize(("doc", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_it_resolves_the_coherence_table_with_aicrs_messages(
    doc: dict[str, Any], expected: str
) -> None:
    if expected.startswith("!"):
        with pytest.raises(InvalidRecipeInput) as caught:
            resolve(doc)
        assert str(caught.value) == expected[1:]
    else:
        assert resolve(doc) == expected


def test_it_reads_the_hydrated_values_base_then_values_file_then_overrides() -> None:
    files = {
        "components/nvidia-dra-driver-gpu/values.yaml": {
            "gpuResourcesEnabledOverride": False,
            "resources": {"gpus": {"enabled": False}, "computeDomains": {"enabled": True}},
        },
        # The platform values file flips the switch; the overlay's override sets the waiver.
        "components/nvidia-dra-driver-gpu/values-dra.yaml": {
            "resources": {"gpus": {"enabled": True}}
        },
        "components/gpu-operator/values.yaml": {"devicePlugin": {"enabled": True}},
        "components/gpu-operator/values-dra.yaml": {"devicePlugin": {"enabled": False}},
    }
    doc = recipe(
        {
            "name": DRA,
            "valuesFile": "components/nvidia-dra-driver-gpu/values-dra.yaml",
            "overrides": {"gpuResourcesEnabledOverride": True},
        },
        {"name": OP, "valuesFile": "components/gpu-operator/values-dra.yaml"},
    )
    assert resolve(doc, read=files.get) == POLICY_DRA_RESOURCE_CLAIM
    # Without the override the values file alone trips the chart guard: every layer counts.
    del doc["componentRefs"][0]["overrides"]
    with pytest.raises(InvalidRecipeInput, match="install guard"):
        resolve(doc, read=files.get)


def test_a_values_file_the_catalog_lacks_fails_closed() -> None:
    doc = recipe({"name": DRA, "valuesFile": "components/nvidia-dra-driver-gpu/gone.yaml"})
    with pytest.raises(InvalidRecipeInput) as caught:
        resolve(doc)
    assert "components/nvidia-dra-driver-gpu/gone.yaml" in str(caught.value)


def test_the_validation_document_carries_the_resolved_policy() -> None:
    doc = recipe(dra(True, True), operator(device_plugin=False))
    assert validation_document(doc, CatalogData({}))["gpuAllocationPolicy"] == "dra-resource-claim"
    assert validation_document(recipe(operator()), CatalogData({}))["gpuAllocationPolicy"] == (
        "device-plugin-extended-resource"
    )


@pytest.mark.django_db
def test_every_recipe_of_the_real_catalog_resolves(real_catalog: Catalog) -> None:
    """All 65 stock recipes pin the production default (the DRA driver's ``values.yaml``:
    ``resources.gpus.enabled: false``, no waiver; the operators' ``devicePlugin.enabled: true``,
    or GKE's declared external advertiser with the operator's plugin off)."""
    data = CatalogData(recipe_services.loaded_catalog(real_catalog).files)
    seen: collections.Counter[tuple[str, str]] = collections.Counter()
    for row in Recipe.objects.filter(catalog=real_catalog).order_by("name"):
        doc = yaml.safe_load(row.canonical_yaml)
        policy = validation_document(doc, data)["gpuAllocationPolicy"]
        names = {
            r["name"]
            for r in doc.get("componentRefs") or ()
            if overrides_enabled(r.get("overrides"))
        }
        advertiser = ((doc["metadata"].get("selectedProfile") or {}).get("advertiser")) or ""
        branch = (
            "external advertiser"
            if advertiser
            else "gpu-operator-ocp"
            if OCP in names
            else "DRA driver + gpu-operator"
            if DRA in names
            else "gpu-operator only"
        )
        seen[(branch, policy)] += 1
    print(dict(seen))
    assert sum(seen.values()) == Recipe.objects.filter(catalog=real_catalog).count() == 65
    assert {policy for _, policy in seen} == {POLICY_DEVICE_PLUGIN}
    # The sweep reaches each branch of the resolver, not just the common one.
    assert {branch for branch, _ in seen} >= {
        "external advertiser",
        "gpu-operator-ocp",
        "DRA driver + gpu-operator",
    }
