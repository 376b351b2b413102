"""Bind: the catalog recipe an in-toto statement's recipe digest names.

The digest is looked up under the scheme the predicate type was signed with
(``verification.digests.scheme_for``): a recipe-evidence v3 record by ``Recipe.digest_v3``
(``metadata.version`` left out, so the same content stamped by another ``aicr`` version is the
same recipe), a v1/v2 record by the legacy ``Recipe.digest``. A digest of the other scheme
never binds, even when it is a known recipe's.

The current catalog is preferred; a recipe of an older catalog binds to that row and is stale.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Count, Max

from evidence_app.verification import AicrStatement
from evidence_app.verification.digests import DigestScheme, scheme_for
from recipes_app.models import Catalog, Recipe

_index_cache: dict[tuple[Any, ...], CatalogIndex] = {}
_index_lock = threading.Lock()


@dataclass(frozen=True)
class CatalogIndex:
    """What bind reads: every catalog version's recipes by digest under each scheme (newest
    catalog first) and the current catalog's by name; ids, names and digests only. Shared,
    read only."""

    current_pk: int | None
    by_digest: Mapping[DigestScheme, Mapping[str, tuple[Recipe, ...]]]
    current_by_name: Mapping[str, Recipe]


def _digest_of(recipe: Recipe, scheme: DigestScheme) -> str:
    return recipe.digest_v3 if scheme is DigestScheme.V3 else recipe.digest


def _catalog_version(policy_version: tuple[Any, ...] | None) -> tuple[Any, ...]:
    """Catalog versions are imported whole and never edited: their count and newest id change
    with any import or removal. PostgreSQL reads them in the policy version's statement."""
    if policy_version is not None:
        return (policy_version[0], policy_version[1], policy_version[-1])
    found = Catalog.objects.aggregate(n=Count("pk"), newest=Max("pk"))
    return (connection.alias, connection.settings_dict.get("NAME"), found["n"], found["newest"])


def catalog_index(policy_version: tuple[Any, ...] | None) -> CatalogIndex:
    """The ``CatalogIndex``, cached in process per catalog version (one query when it changed;
    none on PostgreSQL while it did not, one aggregate on SQLite). Built while an import
    commits, it may hold the newer catalog under the older version: newer, never missing."""
    key = _catalog_version(policy_version)
    with _index_lock:
        cached = _index_cache.get(key)
    if cached is not None:
        return cached
    current_pk = Catalog.objects.newest_first().values_list("pk", flat=True).first()
    by_digest: dict[DigestScheme, dict[str, list[Recipe]]] = {s: {} for s in DigestScheme}
    current_by_name: dict[str, Recipe] = {}
    recipes = Recipe.objects.only("pk", "name", "digest", "digest_v3", "catalog_id").order_by(
        "-catalog__imported_at", "-catalog__pk", "pk"
    )
    for recipe in recipes:
        for scheme, rows in by_digest.items():
            digest = _digest_of(recipe, scheme)
            if digest:  # a row written before digest_v3 was filled has none to bind by
                rows.setdefault(digest, []).append(recipe)
        if recipe.catalog_id == current_pk:
            current_by_name.setdefault(recipe.name, recipe)
    index = CatalogIndex(
        current_pk=current_pk,
        by_digest={
            scheme: {digest: tuple(found) for digest, found in rows.items()}
            for scheme, rows in by_digest.items()
        },
        current_by_name=current_by_name,
    )
    with _index_lock:
        _index_cache.clear()
        _index_cache[key] = index
    return index


def bind_recipe(statement: AicrStatement, index: CatalogIndex) -> tuple[Recipe | None, str]:
    """The recipe row the statement names (current catalog first), or None and the reason;
    the reason or detail says which digest bound it."""
    scheme = scheme_for(statement.predicate_type)
    digest = statement.recipe_digest
    by = f"by {scheme.label}"
    candidates = index.by_digest[scheme].get(digest, ())
    named = [r for r in candidates if r.name == statement.recipe_name]
    if not named:
        return None, _unbound(statement, index, scheme, candidates)
    in_current = [r for r in named if r.catalog_id == index.current_pk]
    recipe = in_current[0] if in_current else named[0]
    if in_current:
        return recipe, (
            f"recipe {recipe.name} (sha256:{digest[:12]}…) of the current catalog "
            f"#{recipe.catalog_id}, {by}"
        )
    now = index.current_by_name.get(recipe.name)
    why = (
        f"the current catalog's {scheme.label} is sha256:{_digest_of(now, scheme)[:12]}…"
        if now is not None
        else "the recipe is not in the current catalog"
    )
    return recipe, (
        f"recipe {recipe.name} (sha256:{digest[:12]}…) of an older catalog #{recipe.catalog_id}, "
        f"{by}; {why}: stale (recipe changed)"
    )


def _unbound(
    statement: AicrStatement,
    index: CatalogIndex,
    scheme: DigestScheme,
    candidates: tuple[Recipe, ...],
) -> str:
    """Why no recipe binds: another recipe's digest, the other scheme's digest, or unknown."""
    digest = statement.recipe_digest
    if candidates:
        return (
            f"recipe digest sha256:{digest[:12]}… is the {scheme.label} of recipe "
            f"{candidates[0].name!r}, not of {statement.recipe_name!r}"
        )
    other = DigestScheme.LEGACY if scheme is DigestScheme.V3 else DigestScheme.V3
    if index.by_digest[other].get(digest):
        # Signed under the wrong scheme: binding it would let a v3 record stand for content
        # whose metadata.version it never covered (or a v1 record skip the version it did).
        return (
            f"recipe digest sha256:{digest[:12]}… is the {other.label} of recipe "
            f"{index.by_digest[other][digest][0].name!r}, but {statement.predicate_type} "
            f"records are bound by the {scheme.label}: wrong digest scheme, not bound"
        )
    current = index.current_by_name.get(statement.recipe_name)
    hint = (
        f"; the current catalog's {statement.recipe_name} has {scheme.label} sha256:"
        f"{_digest_of(current, scheme)[:12]}…"
        if current is not None
        else f"; no catalog version has a recipe named {statement.recipe_name!r}"
    )
    return (
        f"unknown recipe: no catalog version has recipe {statement.recipe_name!r} with "
        f"{scheme.label} sha256:{digest[:12]}…{hint}"
    )
