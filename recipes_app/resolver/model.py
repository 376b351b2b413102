"""Typed, immutable model of the catalog documents (AICR ``pkg/recipe`` structs).

Everything loaded from the tree is frozen: resolutions share these objects (and the override
dicts inside them, which are never mutated after loading) instead of deep-copying them, and
build new objects whenever a merge changes something. Lists are tuples; ``None`` stands for a Go
nil slice where AICR tells nil and empty apart (validation ``checks: []`` clears inherited
checks, an absent ``checks`` inherits them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .criteria import Criteria

COMPONENT_TYPE_HELM = "Helm"
COMPONENT_TYPE_KUSTOMIZE = "Kustomize"

RECIPE_METADATA_KIND = "RecipeMetadata"
RECIPE_MIXIN_KIND = "RecipeMixin"
RECIPE_RESULT_KIND = "RecipeResult"
COMPONENT_REGISTRY_KIND = "ComponentRegistry"
VALIDATOR_CATALOG_KIND = "ValidatorCatalog"
API_VERSION = "aicr.run/v1alpha2"
#: apiVersion of profiled overlays and of results that carry a profile or Slurm configuration.
PROFILE_API_VERSION = "aicr.run/v1alpha3"
#: The validator catalog's apiVersion. ADR-022 does not list ``ValidatorCatalog`` and no v1.x
#: ``validators/catalog.yaml`` exists offline, so v1 trees are read with the same value; a v1
#: tree that uses another one is refused naming it (AICR-V1.md §10: the v1 bytes are unknown).
VALIDATOR_API_VERSION = "validator.nvidia.com/v1alpha1"


@dataclass(frozen=True, slots=True)
class ApiFamily:
    """One ADR-022 generation of apiVersions: what catalog files say, what results say.

    ``catalog`` is the apiVersion of RecipeMetadata, RecipeMixin and ComponentRegistry;
    ``catalog_profiled`` of profile-bearing RecipeMetadata; ``result`` of a plain RecipeResult;
    ``result_profiled`` of a profile-bearing or Slurm-configured one.
    """

    name: str
    catalog: str
    catalog_profiled: str
    result: str
    result_profiled: str


#: Up to AICR v0.21 (the bundled v0.19 tree).
ALPHA = ApiFamily(
    name="alpha",
    catalog=API_VERSION,
    catalog_profiled=PROFILE_API_VERSION,
    result=API_VERSION,
    result_profiled=PROFILE_API_VERSION,
)
#: AICR v0.22+ and 1.x (ADR-022, docs/design/022-artifact-maturity-and-deprecation.md):
#: catalog kinds move to v1beta1 (profiled: v1beta2); a RecipeResult to v1 (profiled or
#: Slurm-configured: v1beta2, which is not the successor of v1).
V1 = ApiFamily(
    name="v1",
    catalog="aicr.run/v1beta1",
    catalog_profiled="aicr.run/v1beta2",
    result="aicr.run/v1",
    result_profiled="aicr.run/v1beta2",
)
FAMILIES = (ALPHA, V1)


def family_of_catalog_api(api: str) -> tuple[ApiFamily, bool] | None:
    """The family a catalog file's apiVersion belongs to and whether it is the profiled one;
    None for an apiVersion no family uses."""
    for family in FAMILIES:
        if api == family.catalog:
            return family, False
        if api == family.catalog_profiled:
            return family, True
    return None


#: Validation phases in AICR's struct order.
PHASES = ("readiness", "deployment", "performance", "conformance")


@dataclass(frozen=True, slots=True)
class Constraint:
    """``Constraint{name, value, severity, remediation, unit}``; value keeps the source text."""

    name: str
    value: str
    severity: str = ""
    remediation: str = ""
    unit: str = ""


@dataclass(frozen=True, slots=True)
class ExpectedResource:
    kind: str
    name: str
    namespace: str = ""


def overrides_enabled(overrides: Mapping[str, Any] | None) -> bool:
    """AICR ``ComponentRef.IsEnabled``: ``overrides.enabled``/``overrides.install`` set to false
    disable a component. A non-bool value is treated as enabled (AICR logs a warning and
    ignores it). Takes the overrides mapping so parsed recipe documents use the same rule.
    """
    if not overrides:
        return True
    return all(overrides.get(key, True) is not False for key in ("enabled", "install"))


@dataclass(frozen=True, slots=True)
class ComponentRef:
    """One ``componentRefs[]`` entry of an overlay, mixin or resolved recipe."""

    name: str
    namespace: str = ""
    chart: str = ""
    type: str = ""
    source: str = ""
    version: str = ""
    tag: str = ""
    values_file: str = ""
    #: ``map[string]any`` with yaml.v3 typing; shared between resolutions, never mutated.
    overrides: dict[str, Any] | None = None
    patches: tuple[str, ...] | None = None
    dependency_refs: tuple[str, ...] | None = None
    manifest_files: tuple[str, ...] | None = None
    pre_manifest_files: tuple[str, ...] | None = None
    path: str = ""
    cleanup: bool = False
    expected_resources: tuple[ExpectedResource, ...] | None = None
    health_check_asserts: str = ""
    health_check_skip: bool = False

    def is_enabled(self) -> bool:
        """AICR ``IsEnabled`` (see ``overrides_enabled``)."""
        return overrides_enabled(self.overrides)


@dataclass(frozen=True, slots=True)
class NodeSelection:
    selector: dict[str, str] | None = None
    max_nodes: int = 0
    exclude_nodes: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class ValidationPhase:
    timeout: str = ""
    constraints: tuple[Constraint, ...] | None = None
    checks: tuple[str, ...] | None = None
    node_selection: NodeSelection | None = None
    infrastructure: str = ""


@dataclass(frozen=True, slots=True)
class ValidationConfig:
    readiness: ValidationPhase | None = None
    deployment: ValidationPhase | None = None
    performance: ValidationPhase | None = None
    conformance: ValidationPhase | None = None


@dataclass(frozen=True, slots=True)
class ProfileComponentRef:
    name: str
    overrides: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ProfileValue:
    advertiser: str = ""
    constraints: tuple[Constraint, ...] = ()
    component_refs: tuple[ProfileComponentRef, ...] = ()


@dataclass(frozen=True, slots=True)
class ProfileDeclaration:
    """ADR-015 ``spec.profile``: a named choice with a closed override surface per value."""

    name: str
    default: str
    values: dict[str, ProfileValue]
    description: str = ""
    #: component -> sorted owned override paths (incl. the synthetic ``enabled``), computed
    #: once at load by ``profile.validate_declaration``.
    owned_paths: dict[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Overlay:
    """A ``RecipeMetadata`` document (``overlays/*.yaml``, including ``base.yaml``)."""

    name: str
    path: str
    api_version: str
    base: str = ""
    criteria: Criteria | None = None
    mixins: tuple[str, ...] | None = None
    constraints: tuple[Constraint, ...] | None = None
    component_refs: tuple[ComponentRef, ...] | None = None
    validation: ValidationConfig | None = None
    profile: ProfileDeclaration | None = None


@dataclass(frozen=True, slots=True)
class Mixin:
    """A ``RecipeMixin`` document: only constraints and componentRefs."""

    name: str
    path: str
    constraints: tuple[Constraint, ...] | None = None
    component_refs: tuple[ComponentRef, ...] | None = None
    api_version: str = API_VERSION


@dataclass(frozen=True, slots=True)
class RegistryEntry:
    """One ``registry.yaml`` component: the defaults the resolver back-fills."""

    name: str
    display_name: str = ""
    helm_repository: str = ""
    helm_chart: str = ""
    helm_version: str = ""
    helm_namespace: str = ""
    kustomize_source: str = ""
    kustomize_path: str = ""
    kustomize_tag: str = ""
    manifest_files: tuple[str, ...] | None = None
    assert_file: str = ""
    value_override_keys: tuple[str, ...] = ()
    #: The whole entry with yaml.v3 typing, for consumers beyond the resolver (scheduling paths,
    #: bundle-time validations, ...).
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def type(self) -> str:
        """AICR ``ComponentConfig.GetType``: Kustomize when a default source is set, else Helm."""
        return COMPONENT_TYPE_KUSTOMIZE if self.kustomize_source else COMPONENT_TYPE_HELM


@dataclass(frozen=True, slots=True)
class Validator:
    """One ``validators/catalog.yaml`` entry."""

    name: str
    phase: str
    description: str = ""
    image: str = ""
    timeout: str = ""
    raw: dict[str, Any] = field(default_factory=dict)
