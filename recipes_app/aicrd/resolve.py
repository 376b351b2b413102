"""Resolving stated criteria the way aicrd's handlers do, on top of ``recipes_app.services``.

The order of checks is aicrd's: parse the criteria (unknown value → "Invalid … criteria"),
refuse a request that states nothing, resolve (AICR's message and context on failure), and —
on the legacy ``/v1`` routes — refuse a profiled result and project a Slurm-accounting result
back to the ``aicr.run/v1alpha2`` shape (aicrd's ``normalizeLegacyRecipeResult``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from recipes_app import resolver, services
from recipes_app.aicrd.errors import SERVICE_UNAVAILABLE, AicrdError, from_resolution
from recipes_app.aicrd.inputs import CriteriaInput
from recipes_app.models import DIMENSIONS, Catalog

LEGACY_API_VERSION = "aicr.run/v1alpha2"
NO_CRITERIA = (
    "no criteria provided: specify at least one of service, accelerator, intent, os, "
    "platform, nodes"
)


def current_catalog() -> Catalog:
    """The catalog version the site serves, without loading its files."""
    catalog = Catalog.objects.defer("files").current()
    if catalog is None:
        raise AicrdError(
            "No recipe catalog has been imported yet",
            code=SERVICE_UNAVAILABLE,
            headers={"Retry-After": "60"},
        )
    return catalog


@dataclass(frozen=True)
class Resolution:
    catalog: Catalog
    doc: dict[str, Any]


def resolve_criteria(
    criteria: CriteriaInput,
    *,
    invalid_message: str,
    profile: str | None = None,
    legacy_route: str | None = None,
) -> Resolution:
    """The RecipeResult for ``criteria`` against the current catalog, or an ``AicrdError``.

    ``legacy_route`` names the v2 route that serves profiled recipes ("/v2/recipe"); when
    given, the answer is the aicrd ``/v1`` one. Without it (``/api/v1/query/``) a profile may
    be selected and the document is returned as the resolver made it.
    """
    catalog = current_catalog()
    try:
        parsed = resolver.parse_criteria(criteria.values, services.loaded_catalog(catalog))
    except resolver.ResolutionError as exc:
        raise AicrdError(invalid_message, details={"error": str(exc)}) from exc
    if parsed.specificity() == 0:
        raise AicrdError(NO_CRITERIA)
    try:
        doc = services.recipe_query(catalog=catalog, params=criteria.values, profile=profile)
    except resolver.ResolutionError as exc:
        stated = {dim: parsed.dim(dim) for dim in DIMENSIONS}
        raise from_resolution(exc, criteria=stated) from exc
    if legacy_route is None:
        return Resolution(catalog=catalog, doc=doc)
    if (doc.get("metadata") or {}).get("selectedProfile"):
        raise AicrdError(f"Profiled recipes are available only on {legacy_route}")
    return Resolution(catalog=catalog, doc=legacy_projection(doc))


def legacy_projection(doc: dict[str, Any]) -> dict[str, Any]:
    """A Slurm-accounting recipe as ``/v1`` serves it: no ``configuration``, v1alpha2."""
    if not (doc.get("configuration") or {}).get("slurm"):
        return doc
    projected = {key: value for key, value in doc.items() if key != "configuration"}
    projected["apiVersion"] = LEGACY_API_VERSION
    return projected
