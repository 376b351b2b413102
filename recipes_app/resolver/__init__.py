"""A faithful Python port of AICR's recipe resolution (main-08), with no Django import.

Public API (everything else in this package is internal):

- ``read_tree(path) -> dict[str, str]``: the resolver's input files of an AICR recipe tree
  (``registry.yaml``, ``overlays/*.yaml``, ``mixins/*.yaml``, the ``checks/`` files the registry
  names, ``validators/catalog.yaml``, ``components/**``), keyed by path relative to the tree root.
- ``load_catalog(files, *, external=None) -> Catalog``: parse and validate those files (raises
  ``CatalogError(path, field, message)``); ``external`` layers a ``--data`` tree over them.
- ``parse_criteria(mapping, catalog=None) -> Criteria``: AICR's criteria parser (aliases,
  unknown values refused with ``CriteriaError`` carrying AICR's message).
- ``resolve(catalog, criteria, *, version, profile=None, accounting_mode=None) -> dict``: one
  RecipeResult document (raises ``ResolutionError`` with AICR's message, uncovered dimensions,
  valid completions and the requires-OS flag).
- ``resolve_leaves(catalog, *, version) -> dict[str, dict]``: every maximal leaf, like AICR's
  ``ResolveLeaves``.
- ``profile_variants(catalog) -> list[ProfileVariant]``: every value of every profiled leaf,
  named ``<leaf>-<profile>-<value>`` like AICR's evidence pointers.
- ``list_catalog(catalog) -> list[dict]``: ``aicr recipe list`` (criteria, leaf flag, profile).
- ``coordinate_for(criteria, *, profile=None) -> str | None``: dashboard coordinate path.
- ``declared_checks(doc) -> dict[phase, list[{name, thresholds}]]``: checks and thresholds.
- ``marshal_deterministic(doc) -> str`` (``serializer.MarshalYAMLDeterministic``),
  ``marshal_canonical(doc) -> str``, ``parity_digest(doc)`` and ``recipe_digest(doc)``
  (``aicr evidence digest``), ``recipe_digest_v3(doc)`` (the ``recipe-evidence/v3`` digest:
  ``metadata.version`` left out), re-exported from ``yamlv3``.
- ``generation_for(catalog, version) -> Generation``: what a resolution stamped with that AICR
  version emits (RecipeResult apiVersions, #2322 error shape); ``unreadable_reason(catalog,
  version)``: why that AICR version cannot read the tree ("" when it can).
- ``criteria_from_snapshot(fingerprint, stated) -> DerivedCriteria`` and
  ``resolve(..., evaluator=...)``: snapshot mode (``aicr recipe --snapshot``, step 11;
  ``MeasurementMissing`` from the evaluator excludes the overlay).
"""

from __future__ import annotations

from .catalog import Catalog, load_catalog, read_tree
from .checks import declared_checks, threshold_owner
from .coordinate import coordinate_for, coordinate_parts
from .criteria import Criteria, CriteriaRegistry, parse_criteria
from .errors import (
    CatalogError,
    CriteriaError,
    MeasurementMissing,
    ResolutionError,
    ResolverError,
)
from .generation import Generation, generation_for, release_of, unreadable_reason
from .resolve import (
    ConstraintEvaluator,
    ProfileVariant,
    find_matching_overlays,
    list_catalog,
    profile_variants,
    resolve,
    resolve_leaves,
)
from .snapshot_mode import DerivedCriteria, criteria_from_snapshot
from .yamlv3 import (
    marshal_canonical,
    marshal_deterministic,
    parity_digest,
    recipe_digest,
    recipe_digest_v3,
    without_version,
)

__all__ = [
    "Catalog",
    "CatalogError",
    "ConstraintEvaluator",
    "Criteria",
    "CriteriaError",
    "CriteriaRegistry",
    "DerivedCriteria",
    "Generation",
    "MeasurementMissing",
    "ProfileVariant",
    "ResolutionError",
    "ResolverError",
    "coordinate_for",
    "coordinate_parts",
    "criteria_from_snapshot",
    "declared_checks",
    "find_matching_overlays",
    "generation_for",
    "list_catalog",
    "load_catalog",
    "marshal_canonical",
    "marshal_deterministic",
    "parity_digest",
    "parse_criteria",
    "profile_variants",
    "read_tree",
    "recipe_digest",
    "recipe_digest_v3",
    "release_of",
    "resolve",
    "resolve_leaves",
    "threshold_owner",
    "unreadable_reason",
    "without_version",
]
