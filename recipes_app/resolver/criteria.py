"""Recipe criteria: the query dimensions, AICR's matching rule and its value parser.

Mirrors main-08 ``pkg/recipe/criteria.go`` and ``criteria_registry.go``:

- ``Criteria.matches`` is ``MatchesCriteriaField`` per dimension, *asymmetric*: an overlay value
  of ``any``/empty matches every query, a specific overlay value never matches a query that
  leaves the dimension open, two specific values must be equal. ``nodes`` is ignored (#1781).
- ``parse_criteria`` applies the CLI/API aliases (``gpu`` for accelerator, ``self-managed`` /
  ``self`` / ``vanilla`` = any service, ``openshift`` = ocp, ``al2``/``al2023`` = amazonlinux),
  lower-cases and trims values, accepts values outside AICR's static enums only when a loaded
  overlay registered them (the per-catalog *criteria registry*), and rejects the rest with
  AICR's text (``invalid service type: windows``). Unstated dimensions become ``any`` like
  AICR's ``NewCriteria`` does, so a resolved document states them as ``any``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from .errors import CriteriaError

ANY = "any"
DIMENSIONS = ("service", "accelerator", "intent", "os", "platform")

#: main-08 static enums (``GetCriteria*Types``).
STATIC_VALUES: dict[str, tuple[str, ...]] = {
    "service": ("aks", "bcm", "eks", "gke", "kind", "lke", "metal3", "ocp", "oke"),
    "accelerator": (
        "a100",
        "b200",
        "gb200",
        "gb300",
        "h100",
        "h200",
        "l40",
        "l40s",
        "rtx-pro-6000",
    ),
    "intent": ("inference", "training"),
    "os": ("amazonlinux", "cos", "ol", "rhel", "talos", "ubuntu"),
    "platform": ("dynamo", "kubeflow", "nim", "runai", "slurm"),
}

#: AICR 1.x static enums: ``api/aicr/v1/schemas/RecipeCriteria.schema.json`` (AICR-V1.md §5)
#: adds services generic, k0s, rke2, accelerator vr200 and platform kueue (a test reads the
#: schema file against this table).
STATIC_VALUES_V1: dict[str, tuple[str, ...]] = {
    "service": tuple(sorted((*STATIC_VALUES["service"], "generic", "k0s", "rke2"))),
    "accelerator": tuple(sorted((*STATIC_VALUES["accelerator"], "vr200"))),
    "intent": STATIC_VALUES["intent"],
    "os": STATIC_VALUES["os"],
    "platform": tuple(sorted((*STATIC_VALUES["platform"], "kueue"))),
}
#: The static enums of each ADR-022 apiVersion family (``model.ApiFamily.name``).
STATIC_VALUES_BY_FAMILY: dict[str, dict[str, tuple[str, ...]]] = {
    "alpha": STATIC_VALUES,
    "v1": STATIC_VALUES_V1,
}

#: Aliases accepted by the parser (after lower-casing), per dimension.
ALIASES: dict[str, dict[str, str]] = {
    "service": {"self-managed": ANY, "self": ANY, "vanilla": ANY, "openshift": "ocp"},
    "accelerator": {},
    "intent": {},
    "os": {"al2": "amazonlinux", "al2023": "amazonlinux"},
    "platform": {},
}


def is_specified(value: str) -> bool:
    """A dimension value that constrains (not empty, not ``any``)."""
    return value != "" and value != ANY


def field_matches(recipe_value: str, query_value: str) -> bool:
    """AICR ``MatchesCriteriaField`` (asymmetric wildcard rule)."""
    if recipe_value == ANY or recipe_value == "":
        return True
    if query_value == ANY or query_value == "":
        return False
    return recipe_value == query_value


@dataclass(frozen=True, slots=True)
class Criteria:
    """``Criteria{service, accelerator, intent, os, platform, nodes}``; ``""``/``any`` = open."""

    service: str = ""
    accelerator: str = ""
    intent: str = ""
    os: str = ""
    platform: str = ""
    nodes: int = 0

    def dim(self, name: str) -> str:
        return str(getattr(self, name))

    def matches(self, query: Criteria) -> bool:
        """Whether an overlay carrying these criteria applies to ``query`` (nodes ignored)."""
        return (
            field_matches(self.service, query.service)
            and field_matches(self.accelerator, query.accelerator)
            and field_matches(self.intent, query.intent)
            and field_matches(self.os, query.os)
            and field_matches(self.platform, query.platform)
        )

    def specificity(self) -> int:
        """Number of constraining dimensions, nodes included (overlay sort key)."""
        score = sum(1 for d in DIMENSIONS if is_specified(getattr(self, d)))
        return score + (1 if self.nodes != 0 else 0)

    def __str__(self) -> str:
        """AICR ``Criteria.String()``: ``criteria(service=eks, ...)``; only ``any`` is hidden.

        An empty (unset) value is still printed (``service=``), which is how the coverage golden
        keys read.
        """
        parts = [f"{d}={getattr(self, d)}" for d in DIMENSIONS if getattr(self, d) != ANY]
        if self.nodes != 0:
            parts.append(f"nodes={self.nodes}")
        if not parts:
            return "criteria(any)"
        return "criteria(" + ", ".join(parts) + ")"

    def to_dict(self) -> dict[str, Any]:
        """The YAML/JSON form: every non-empty field (``omitempty``), ``any`` kept."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value:
                out[f.name] = value
        return out


class CriteriaRegistry:
    """Criteria values registered by the loaded overlays (AICR's per-provider registry), over
    the static enums of the catalog's AICR generation (``family``: ``alpha`` or ``v1``)."""

    __slots__ = ("_values", "static")

    def __init__(self, family: str = "alpha") -> None:
        self._values: dict[str, set[str]] = {d: set() for d in DIMENSIONS}
        self.static: dict[str, tuple[str, ...]] = STATIC_VALUES_BY_FAMILY[family]

    def register(self, criteria: Criteria | None) -> None:
        if criteria is None:
            return
        for d in DIMENSIONS:
            value = _normalize(getattr(criteria, d))
            if value and value != ANY:
                self._values[d].add(value)

    def has(self, dim: str, value: str) -> bool:
        return _normalize(value) in self._values[dim]

    def values(self, dim: str) -> list[str]:
        return sorted(self._values[dim])

    def all_values(self, dim: str) -> list[str]:
        """Static enum merged with registered values, sorted (``All*Types``)."""
        return sorted(set(self.static[dim]) | self._values[dim])

    def all_values_by_dimension(self) -> dict[str, list[str]]:
        return {dim: self.all_values(dim) for dim in DIMENSIONS}


def _normalize(value: str) -> str:
    return value.strip().lower()


def parse_value(dim: str, raw: str, registry: CriteriaRegistry | None = None) -> str:
    """Parse one dimension value like AICR's ``Parse<Dim>`` (empty/``any`` give ``any``).

    Raises ``CriteriaError`` with AICR's message (``invalid os type: windows``) for a value
    that is neither in the static enum, nor an alias, nor registered by a loaded overlay.
    """
    value = _normalize(raw)
    if value in ("", ANY):
        return ANY
    alias = ALIASES[dim].get(value)
    if alias is not None:
        return alias
    static = registry.static if registry is not None else STATIC_VALUES
    if value in static[dim]:
        return value
    if registry is not None and registry.has(dim, value):
        return value
    raise CriteriaError(f"invalid {dim} type: {raw}")


def parse_nodes(raw: Any) -> int:
    """Parse ``nodes`` (non-negative int; ``0`` = any)."""
    if raw is None or raw == "":
        return 0
    if isinstance(raw, bool):
        raise CriteriaError(f"invalid nodes value: {raw}")
    if isinstance(raw, int):
        n = raw
    else:
        text = str(raw).strip()
        digits = text.lstrip("+-")
        if not digits.isdigit():
            raise CriteriaError(f"invalid nodes value: {raw}")
        n = int(text)
    if n < 0:
        raise CriteriaError(f"invalid nodes count: {n} (must be >= 0)")
    return n


def parse_criteria(
    mapping: Mapping[str, Any] | Criteria, catalog: CriteriaRegistry | Any | None = None
) -> Criteria:
    """Build query ``Criteria`` from user input (form fields, query params, a criteria file).

    ``mapping`` keys: ``service``, ``accelerator`` (alias ``gpu``, used when ``accelerator`` is
    absent or empty), ``intent``, ``os``, ``platform``, ``nodes``. Unknown keys are refused so a
    typo does not silently widen the query. ``catalog`` is a ``Catalog`` (its criteria registry
    is used) or a ``CriteriaRegistry``; without one only static values and aliases pass.
    Raises ``CriteriaError`` (a ``ResolutionError``) with AICR's message.
    """
    if isinstance(mapping, Criteria):
        mapping = {f.name: getattr(mapping, f.name) for f in fields(mapping)}
    reg = getattr(catalog, "criteria_registry", catalog)
    known = {*DIMENSIONS, "gpu", "nodes"}
    unknown = sorted(str(k) for k in mapping if k not in known)
    if unknown:
        raise CriteriaError(f"unknown criteria field(s): {', '.join(unknown)}")
    values: dict[str, Any] = {}
    for dim in DIMENSIONS:
        raw = mapping.get(dim)
        if dim == "accelerator" and (raw is None or raw == ""):
            raw = mapping.get("gpu")
        values[dim] = parse_value(dim, "" if raw is None else str(raw), reg)
    values["nodes"] = parse_nodes(mapping.get("nodes"))
    return Criteria(**values)
