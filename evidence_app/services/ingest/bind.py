"""Bind: the catalog recipe an in-toto statement's subject digest names.

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
from recipes_app.models import Catalog, Recipe

_index_cache: dict[tuple[Any, ...], CatalogIndex] = {}
_index_lock = threading.Lock()


@dataclass(frozen=True)
class CatalogIndex:
    """What bind reads: every catalog version's recipes by digest (newest catalog first) and
    the current catalog's by name; ids, names and digests only. Shared, read only."""

    current_pk: int | None
    by_digest: Mapping[str, tuple[Recipe, ...]]
    current_by_name: Mapping[str, Recipe]


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
    by_digest: dict[str, list[Recipe]] = {}
    current_by_name: dict[str, Recipe] = {}
    recipes = Recipe.objects.only("pk", "name", "digest", "catalog_id").order_by(
        "-catalog__imported_at", "-catalog__pk", "pk"
    )
    for recipe in recipes:
        by_digest.setdefault(recipe.digest, []).append(recipe)
        if recipe.catalog_id == current_pk:
            current_by_name.setdefault(recipe.name, recipe)
    index = CatalogIndex(
        current_pk=current_pk,
        by_digest={digest: tuple(rows) for digest, rows in by_digest.items()},
        current_by_name=current_by_name,
    )
    with _index_lock:
        _index_cache.clear()
        _index_cache[key] = index
    return index


def bind_recipe(statement: AicrStatement, index: CatalogIndex) -> tuple[Recipe | None, str]:
    """The recipe row the statement names (current catalog first), or None and the reason."""
    digest = statement.recipe_digest
    candidates = index.by_digest.get(digest, ())
    named = [r for r in candidates if r.name == statement.recipe_name]
    if not named:
        if candidates:
            return None, (
                f"subject digest sha256:{digest[:12]}… is the digest of recipe "
                f"{candidates[0].name!r}, not of {statement.recipe_name!r}"
            )
        current = index.current_by_name.get(statement.recipe_name)
        hint = (
            f"; the current catalog's {statement.recipe_name} has digest sha256:"
            f"{current.digest[:12]}…"
            if current is not None
            else f"; no catalog version has a recipe named {statement.recipe_name!r}"
        )
        return None, (
            f"unknown recipe: no catalog version has recipe {statement.recipe_name!r} with "
            f"digest sha256:{digest[:12]}…{hint}"
        )
    in_current = [r for r in named if r.catalog_id == index.current_pk]
    recipe = in_current[0] if in_current else named[0]
    if in_current:
        return recipe, (
            f"recipe {recipe.name} (sha256:{digest[:12]}…) of the current catalog "
            f"#{recipe.catalog_id}"
        )
    now = index.current_by_name.get(recipe.name)
    why = (
        f"the current catalog's digest is sha256:{now.digest[:12]}…"
        if now is not None
        else "the recipe is not in the current catalog"
    )
    return recipe, (
        f"recipe {recipe.name} (sha256:{digest[:12]}…) of an older catalog #{recipe.catalog_id}; "
        f"{why}: stale (recipe changed)"
    )
