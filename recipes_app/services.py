"""Workflows of the recipe catalog: importing a tree, and resolving criteria against a version."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from evidence_app.consensus import stored
from recipes_app import resolver
from recipes_app.models import ANY, DIMENSIONS, Catalog, Recipe, RecipeChange

DEFAULT_AICR_VERSION = "dev"


@dataclass(frozen=True)
class ImportResult:
    catalog: Catalog
    created: bool
    new: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


def content_digest(files: Mapping[str, str]) -> str:
    """sha256 over the sorted (path, sha256(content)) pairs: equal trees, equal digests."""
    outer = hashlib.sha256()
    for path in sorted(files):
        inner = hashlib.sha256(files[path].encode()).hexdigest()
        outer.update(f"{path}\0{inner}\n".encode())
    return outer.hexdigest()


def check_set_digest(checks: list[str]) -> str:
    """sha256 of a validator check set (``Catalog.validator_checks``), one entry a line."""
    return hashlib.sha256("".join(f"{c}\n" for c in checks).encode()).hexdigest()


def catalog_import(*, files: Mapping[str, str], source: str, aicr_version: str) -> ImportResult:
    """Import a recipe tree as a catalog version; a no-op when this exact version exists.

    Everything is resolved before the first write and written in one transaction, so a
    broken tree (``resolver.CatalogError``) or a failing resolution leaves nothing behind.
    """
    digest = content_digest(files)
    existing = Catalog.objects.filter(content_digest=digest, aicr_version=aicr_version).first()
    if existing is not None:
        return ImportResult(catalog=existing, created=False)

    loaded = resolver.load_catalog(files)
    unreadable = resolver.unreadable_reason(loaded, aicr_version)
    if unreadable:
        raise resolver.CatalogError("<tree>", "--aicr-version", unreadable)
    resolved = _resolve_all(loaded, aicr_version=aicr_version)
    checks = loaded.validator_checks()

    with transaction.atomic():
        previous = Catalog.objects.select_for_update().newest_first().first()
        previous_digests = (
            dict(Recipe.objects.filter(catalog=previous).values_list("name", "digest"))
            if previous is not None
            else {}
        )
        catalog = Catalog.objects.create(
            source=source,
            aicr_version=aicr_version,
            content_digest=digest,
            files=dict(files),
            file_count=len(files),
            validator_catalog_version=loaded.validator_catalog_version[:100],
            api_family=loaded.api_family.name,
            validator_checks=checks,
            validator_checks_digest=check_set_digest(checks),
            criteria_values=loaded.criteria_values(),
        )
        recipes = [
            _recipe_row(catalog, name, leaf, profile, is_default, doc, previous_digests)
            for name, (leaf, profile, is_default, doc) in sorted(resolved.items())
        ]
        Recipe.objects.bulk_create(recipes)
        stored.catalog_changed()  # the new current catalog moves declared checks, staleness

    return ImportResult(
        catalog=catalog,
        created=True,
        new=[r.name for r in recipes if r.change == RecipeChange.NEW],
        changed=[r.name for r in recipes if r.change == RecipeChange.CHANGED],
        removed=sorted(set(previous_digests) - set(resolved)),
    )


def _resolve_all(
    loaded: resolver.Catalog, *, aicr_version: str
) -> dict[str, tuple[str, str, bool, dict[str, Any]]]:
    """Every leaf, then every profile variant, keyed by recipe name."""
    result: dict[str, tuple[str, str, bool, dict[str, Any]]] = {
        leaf: (leaf, "", False, doc)
        for leaf, doc in resolver.resolve_leaves(loaded, version=aicr_version).items()
    }
    for variant in resolver.profile_variants(loaded):
        # The leaf's own criteria, as stated: re-parsing would fill unstated dims with "any"
        # and change the document (and its digest) against what AICR resolves.
        criteria = variant.criteria or resolver.Criteria()
        doc = resolver.resolve(loaded, criteria, version=aicr_version, profile=variant.profile)
        result[variant.name] = (variant.leaf, variant.profile, variant.is_default, doc)
    return result


def _recipe_row(
    catalog: Catalog,
    name: str,
    leaf: str,
    profile: str,
    is_default: bool,
    doc: dict[str, Any],
    previous_digests: Mapping[str, str],
) -> Recipe:
    criteria = {dim: str(doc.get("criteria", {}).get(dim) or ANY) for dim in DIMENSIONS}
    components = component_summaries(doc)
    checks = resolver.declared_checks(doc)
    digest = resolver.recipe_digest(doc)
    if name not in previous_digests:
        change = RecipeChange.NEW
    elif previous_digests[name] != digest:
        change = RecipeChange.CHANGED
    else:
        change = RecipeChange.UNCHANGED
    words = [name, leaf, profile, *criteria.values()]
    words += [f"{c['name']} {c.get('version', '')} {c.get('chart', '')}" for c in components]
    words += [check["name"] for phase in checks.values() for check in phase]
    return Recipe(
        catalog=catalog,
        name=name,
        leaf=leaf,
        profile=profile,
        is_default_profile=is_default,
        coordinate=resolver.coordinate_for(resolver.parse_criteria(doc.get("criteria", {}))) or "",
        api_version=doc["apiVersion"],
        applied_overlays=list(doc.get("metadata", {}).get("appliedOverlays", [])),
        deployment_order=list(doc.get("deploymentOrder", [])),
        components=components,
        constraints=list(doc.get("constraints", [])),
        checks=checks,
        check_count=sum(len(phase) for phase in checks.values()),
        component_count=len(components),
        deterministic_yaml=resolver.marshal_deterministic(doc),
        canonical_yaml=resolver.marshal_canonical(doc),
        digest=digest,
        digest_v3=resolver.recipe_digest_v3(doc),
        parity_digest=resolver.parity_digest(doc),
        change=change,
        search_text=" ".join(words).lower(),
        **criteria,
    )


COMPONENT_FIELDS = ("type", "chart", "source", "version", "tag", "path", "namespace", "valuesFile")


def component_summaries(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What each component installs, in deployment order, then any disabled ones."""
    order = {name: i for i, name in enumerate(doc.get("deploymentOrder", []))}
    summaries = []
    for ref in doc.get("componentRefs", []):
        summary: dict[str, Any] = {"name": ref["name"]}
        summary.update({key: ref[key] for key in COMPONENT_FIELDS if ref.get(key)})
        summary["dependencyRefs"] = list(ref.get("dependencyRefs", []))
        summary["enabled"] = (ref.get("overrides") or {}).get("enabled") is not False
        summaries.append(summary)
    return sorted(summaries, key=lambda s: (order.get(s["name"], len(order)), s["name"]))


# Parsing a catalog's files takes ~0.1 s; queries reuse the parsed form per catalog version.
_LOADED: OrderedDict[int, resolver.Catalog] = OrderedDict()
_LOADED_LOCK = threading.Lock()
_LOADED_MAX = 4


def loaded_catalog(catalog: Catalog) -> resolver.Catalog:
    with _LOADED_LOCK:
        if catalog.pk in _LOADED:
            _LOADED.move_to_end(catalog.pk)
            return _LOADED[catalog.pk]
    loaded = resolver.load_catalog(catalog.files)
    with _LOADED_LOCK:
        _LOADED[catalog.pk] = loaded
        while len(_LOADED) > _LOADED_MAX:
            _LOADED.popitem(last=False)
    return loaded


def recipe_query(
    *, catalog: Catalog, params: Mapping[str, Any], profile: str | None = None
) -> dict[str, Any]:
    """Resolve arbitrary criteria like aicrd's ``GET /v1/recipe``.

    Raises ``resolver.ResolutionError`` (and ``resolver.CriteriaError`` for unknown values)
    carrying AICR's message.
    """
    loaded = loaded_catalog(catalog)
    criteria = resolver.parse_criteria(params, catalog=loaded)
    return resolver.resolve(loaded, criteria, version=catalog.aicr_version, profile=profile)
