"""Reads behind the recipe pages: the filtered listing, one recipe, its variants and its diff.

Every function here runs a fixed number of queries, whatever the size of the catalog.
"""

from __future__ import annotations

import difflib
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from django.core.paginator import Page, Paginator
from django.db.models import Case, F, IntegerField, OuterRef, Q, QuerySet, Subquery, Value, When
from django.http import QueryDict
from django.urls import reverse

from evidence_app.consensus import STATES, UNTESTED
from evidence_app.models import Evidence
from recipes_app.filters import MAX_QUERY_LENGTH, RecipeFilter
from recipes_app.models import ANY, DIMENSIONS, PHASES, Catalog, Recipe
from recipes_app.resolver.checks import DeclaredCheck

PAGE_SIZE = 20
FILTER_FIELDS: tuple[str, ...] = (
    "q",
    *DIMENSIONS,
    "catalog",
    "consensus",
    "has_evidence",
    "sort",
)
# ``?sort=`` values, the default first (left out of a shareable URL). State first: the list
# answers "what is validated" before anything else (CONFIRMED first … UNTESTED last).
SORTS: dict[str, str] = {
    "state": "Consensus state (best first)",
    "name": "Name",
    "attested": "Last attested (newest first)",
}
DEFAULT_SORT = "state"
# A diff longer than this is cut; the full YAML of both sides stays one click away.
MAX_DIFF_LINES = 4000
# The columns a catalog label needs: never the (megabytes of) tree files.
CATALOG_LABEL_FIELDS = ("id", "source", "aicr_version", "content_digest", "imported_at")


def catalog_versions() -> QuerySet[Catalog]:
    """Every imported catalog version, newest first, without its files."""
    return Catalog.objects.newest_first().only(*CATALOG_LABEL_FIELDS)


def catalog_pk(raw: str) -> int | None:
    """A catalog id from user input, or None when it cannot be one (not a number, too big)."""
    raw = raw.strip()
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 18 else None


def _earlier_than(catalog: Catalog, prefix: str = "") -> Q:
    """Catalog versions imported before ``catalog`` (ties broken by primary key)."""
    return Q(**{f"{prefix}imported_at__lt": catalog.imported_at}) | Q(
        **{f"{prefix}imported_at": catalog.imported_at, f"{prefix}pk__lt": catalog.pk}
    )


# --- the list page -------------------------------------------------------------------------


DIMENSION_LABELS = {
    "service": "Service",
    "accelerator": "Accelerator",
    "os": "OS",
    "intent": "Intent",
    "platform": "Platform",
}


@dataclass(frozen=True)
class FacetOption:
    value: str
    count: int
    selected: bool


@dataclass(frozen=True)
class FacetField:
    name: str
    label: str
    options: list[FacetOption]


@dataclass(frozen=True)
class CatalogOption:
    value: str  # "" for the current version, so the default URL carries no catalog id
    catalog: Catalog
    is_current: bool
    selected: bool


@dataclass(frozen=True)
class RecipeListing:
    catalog: Catalog | None
    is_current_catalog: bool
    has_earlier_catalog: bool
    catalog_options: list[CatalogOption]
    facet_fields: list[FacetField]
    sort: str
    page: Page[Recipe]
    errors: list[str]
    query: QueryDict  # the active filters only: what a shareable URL needs
    cleared_query: QueryDict  # the same without the fields in error
    reset_query: QueryDict  # no filters, same catalog version
    search_max_length: int = MAX_QUERY_LENGTH

    @property
    def filter_count(self) -> int:
        """How many filters narrow the list (the catalog version and the sort do not)."""
        return sum(1 for key in self.query if key not in ("catalog", "sort"))

    @property
    def is_filtered(self) -> bool:
        return self.filter_count > 0

    @property
    def sort_options(self) -> list[tuple[str, str, bool]]:
        """``(value, label, selected)`` for the sort control."""
        return [(value, label, value == self.sort) for value, label in SORTS.items()]

    @property
    def detail_query(self) -> str:
        """What a row's link to its recipe page adds: an earlier version names its catalog."""
        if self.is_current_catalog or self.catalog is None:
            return ""
        return f"?catalog={self.catalog.pk}"

    @property
    def cleared_qs(self) -> str:
        return query_string(self.cleared_query)

    @property
    def reset_qs(self) -> str:
        return query_string(self.reset_query)

    @property
    def shareable_qs(self) -> str:
        """The active filters and, past the first, the page: what the address bar shows."""
        number = self.page.number
        return query_string(self.query, page=str(number) if number > 1 else None)


def query_string(query: QueryDict, **extra: str | None) -> str:
    """``?a=1&b=2`` from ``query`` plus ``extra`` (None drops a key), or "" when empty."""
    params = query.copy()
    for key, value in extra.items():
        if value is None:
            params.pop(key, None)
        else:
            params[key] = value
    encoded = params.urlencode()
    return f"?{encoded}" if encoded else ""


def active_filters(params: Mapping[str, Any]) -> QueryDict:
    """The non-empty filter parameters, in a stable order (the URL a person shares)."""
    query = QueryDict(mutable=True)
    for key in FILTER_FIELDS:
        value = str(params.get(key) or "").strip()
        if value:
            query[key] = value
    return query


def recipe_listing(*, params: Mapping[str, Any], page_number: str | int | None) -> RecipeListing:
    """One page of recipes matching ``params``, with facet counts and the catalog shown.

    Queries: the current catalog, the facet rows, the catalog versions, the count and the
    page (plus two to check a ``catalog`` parameter): constant for any number of recipes.
    """
    query = active_filters(params)
    if query.get("sort") == DEFAULT_SORT:
        del query["sort"]  # one URL per listing
    sort = query.get("sort", DEFAULT_SORT)
    filterset = RecipeFilter(query, queryset=Recipe.objects.for_listing())
    errors = [_naming_the_value(line, query) for line in filterset.error_messages()]
    bad_sort = sort not in SORTS
    if bad_sort:
        errors.append(_naming_the_value(f"sort: choose one of {', '.join(SORTS)}", query))
    catalog = filterset.catalog_version
    catalogs = list(catalog_versions())
    results = Recipe.objects.none() if errors else _sorted(filterset.qs, sort)

    cleared = query.copy()
    for key in [*filterset.form.errors, *(["sort"] if bad_sort else [])]:
        cleared.pop(key, None)
    reset = QueryDict(mutable=True)
    if "catalog" in cleared:
        reset["catalog"] = cleared.get("catalog", "")

    facets = filterset.facets()
    facet_fields = [
        FacetField(
            name=dim,
            label=DIMENSION_LABELS[dim],
            options=[
                FacetOption(value=value, count=count, selected=value == query.get(dim))
                for value, count in facets[dim]
            ],
        )
        for dim in DIMENSIONS
    ]
    newest = catalogs[0] if catalogs else None
    catalog_options = [
        CatalogOption(
            value="" if other == newest else str(other.pk),
            catalog=other,
            is_current=other == newest,
            selected=catalog is not None and other.pk == catalog.pk,
        )
        for other in catalogs
    ]
    return RecipeListing(
        catalog=catalog,
        is_current_catalog=catalog is not None and catalog == newest,
        has_earlier_catalog=catalog is not None
        and any(_is_earlier(other, catalog) for other in catalogs),
        catalog_options=catalog_options,
        facet_fields=facet_fields,
        sort=sort,
        page=Paginator(results, PAGE_SIZE).get_page(page_number),
        errors=errors,
        query=query,
        cleared_query=cleared,
        reset_query=reset,
    )


def _sorted(recipes: QuerySet[Recipe], sort: str) -> QuerySet[Recipe]:
    """``recipes`` with each one's last counted attestation, in ``sort`` order; the name
    breaks every tie. ``state`` sorts on the stored consensus column in SQL (a recipe without
    a stored row is UNTESTED)."""
    last = (
        Evidence.objects.counted()
        .filter(recipe_name=OuterRef("name"))
        .order_by("-attested_at")
        .values("attested_at")[:1]
    )
    recipes = recipes.annotate(last_attested=Subquery(last))
    if sort == "state":
        rank = Case(
            *(When(consensus__state=state, then=Value(i)) for i, state in enumerate(STATES)),
            default=Value(STATES.index(UNTESTED)),
            output_field=IntegerField(),
        )
        return recipes.order_by(rank, "name")
    if sort == "attested":
        return recipes.order_by(F("last_attested").desc(nulls_last=True), "name")
    return recipes.order_by("name")


def _naming_the_value(line: str, query: QueryDict) -> str:
    """Append the rejected value to a "field: message" line that does not already name it."""
    value = query.get(line.split(":", 1)[0], "")
    if not value or value in line:
        return line
    shown = value if len(value) <= 60 else value[:60] + "…"
    return f"{line} (got “{shown}”)"


def _is_earlier(other: Catalog, catalog: Catalog) -> bool:
    return (other.imported_at, other.pk) < (catalog.imported_at, catalog.pk)


# --- the detail page -----------------------------------------------------------------------


def recipe_get(*, name: str, catalog_id: str | None = None) -> Recipe | None:
    """The recipe called ``name`` in the given catalog version (default: the current one)."""
    if catalog_id:
        pk = catalog_pk(catalog_id)
        catalog = catalog_versions().filter(pk=pk).first() if pk is not None else None
    else:
        catalog = catalog_versions().first()
    if catalog is None:
        return None
    recipe = (
        Recipe.objects.filter(catalog=catalog, name=name)
        .defer("canonical_yaml", "search_text")
        .first()
    )
    if recipe is not None:
        recipe.catalog = catalog  # the label columns only; the files stay in the database
    return recipe


def catalogs_containing(*, name: str) -> list[Catalog]:
    """The catalog versions that have a recipe called ``name``, newest first."""
    return list(catalog_versions().filter(recipes__name=name))


def recipe_variants(recipe: Recipe) -> list[Recipe]:
    """Every recipe resolved from the same leaf (the leaf itself and its profile variants)."""
    return list(
        Recipe.objects.filter(catalog_id=recipe.catalog_id, leaf=recipe.leaf)
        .only("id", "name", "leaf", "profile", "is_default_profile")
        .order_by("profile", "name")
    )


@dataclass(frozen=True)
class PhaseChecks:
    phase: str
    checks: list[DeclaredCheck]


def checks_by_phase(recipe: Recipe) -> list[PhaseChecks]:
    """Declared checks in AICR's phase order, every phase present (possibly empty)."""
    return [PhaseChecks(phase=phase, checks=recipe.checks.get(phase, [])) for phase in PHASES]


def aicr_recipe_command(recipe: Recipe) -> str:
    """The ``aicr recipe …`` command line that reproduces this recipe.

    Dimensions left at ``any`` are omitted, as AICR's CLI treats a missing flag as any.
    """
    parts = ["aicr", "recipe"]
    for dim in DIMENSIONS:
        value = getattr(recipe, dim)
        if value and value != ANY:
            parts += [f"--{dim}", shlex.quote(value)]
    if recipe.profile:
        parts += ["--profile", shlex.quote(recipe.profile)]
    return " ".join(parts)


def _pinned(url: str, recipe: Recipe, pin_catalog: bool) -> str:
    """``url``, naming the recipe's catalog version when asked (an earlier version's copy)."""
    return f"{url}?catalog={recipe.catalog_id}" if pin_catalog else url


def resolved_yaml_url(recipe: Recipe, *, pin_catalog: bool = False) -> str:
    """Where the API serves the canonical YAML whose sha256 is the recipe digest."""
    url = f"/api/v1/recipes/{quote(recipe.name, safe='')}/resolved.yaml"
    return _pinned(url, recipe, pin_catalog)


def recipe_yaml_url(recipe: Recipe, *, pin_catalog: bool = False) -> str:
    """Where the site serves the recipe as ``aicr recipe`` prints it (``views.recipe_yaml``)."""
    return _pinned(reverse("recipes:yaml", args=[recipe.name]), recipe, pin_catalog)


@dataclass(frozen=True)
class AgainstOption:
    catalog: Catalog
    has_recipe: bool
    selected: bool


@dataclass(frozen=True)
class RecipePage:
    recipe: Recipe
    is_current_catalog: bool
    current_catalog: Catalog
    has_earlier_catalog: bool  # else "changed since the previous version" means nothing
    variants: list[Recipe]
    phases: list[PhaseChecks]
    command: str
    resolved_yaml_url: str
    yaml_url: str
    yaml_line_count: int
    diff: RecipeDiff
    against_options: list[AgainstOption]


def recipe_page(*, name: str, catalog_id: str | None, against: str | None) -> RecipePage | None:
    """Everything the recipe page shows, or None when no such recipe exists in that version.

    Queries: the catalog, the recipe, the catalog versions, the diff's other side (plus one
    when there is none), the versions holding this name, the variants: constant.
    """
    recipe = recipe_get(name=name, catalog_id=catalog_id)
    if recipe is None:
        return None
    catalogs = list(catalog_versions())
    is_current = recipe.catalog_id == catalogs[0].pk
    diff = recipe_diff(recipe=recipe, against=against)
    holding = set(Recipe.objects.filter(name=name).values_list("catalog_id", flat=True))
    selected_pk = diff.against.pk if diff.against is not None else None
    return RecipePage(
        recipe=recipe,
        is_current_catalog=is_current,
        current_catalog=catalogs[0],
        has_earlier_catalog=any(_is_earlier(other, recipe.catalog) for other in catalogs),
        variants=recipe_variants(recipe),
        phases=checks_by_phase(recipe),
        command=aicr_recipe_command(recipe),
        resolved_yaml_url=resolved_yaml_url(recipe, pin_catalog=not is_current),
        yaml_url=recipe_yaml_url(recipe, pin_catalog=not is_current),
        yaml_line_count=recipe.deterministic_yaml.count("\n"),
        diff=diff,
        against_options=[
            AgainstOption(
                catalog=other, has_recipe=other.pk in holding, selected=other.pk == selected_pk
            )
            for other in catalogs
            if other.pk != recipe.catalog_id
        ],
    )


# --- the diff against an earlier catalog version ---------------------------------------------


class DiffStatus:
    CHANGED = "changed"
    IDENTICAL = "identical"
    ABSENT = "absent"  # the chosen version has no recipe of that name
    NO_EARLIER = "no-earlier"  # no earlier version has this recipe (or there is none at all)
    UNKNOWN_CATALOG = "unknown-catalog"  # ?against= names no catalog version


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "file", "hunk", "add", "del" or "ctx"
    text: str


@dataclass(frozen=True)
class RecipeDiff:
    status: str
    against: Catalog | None = None
    against_raw: str = ""
    lines: list[DiffLine] = field(default_factory=list)
    added: int = 0
    removed: int = 0
    truncated: bool = False
    earlier_exists: bool = False  # any catalog version older than the recipe's own

    @property
    def is_error(self) -> bool:
        return self.status == DiffStatus.UNKNOWN_CATALOG


def recipe_diff(*, recipe: Recipe, against: str | None) -> RecipeDiff:
    """Unified diff of ``recipe.deterministic_yaml`` against the same recipe in another version.

    ``against`` is a catalog id; by default the newest earlier version holding this recipe.
    """
    raw = (against or "").strip()
    if raw:
        pk = catalog_pk(raw)
        target = catalog_versions().filter(pk=pk).first() if pk is not None else None
        if target is None:
            return RecipeDiff(status=DiffStatus.UNKNOWN_CATALOG, against_raw=raw[:100])
        other = (
            Recipe.objects.filter(catalog=target, name=recipe.name)
            .only("id", "deterministic_yaml", "digest")
            .first()
        )
        if other is None:
            return RecipeDiff(status=DiffStatus.ABSENT, against=target, against_raw=raw)
    else:
        other = (
            Recipe.objects.filter(name=recipe.name)
            .filter(_earlier_than(recipe.catalog, prefix="catalog__"))
            .select_related("catalog")
            .only(
                "id",
                "deterministic_yaml",
                "digest",
                *(f"catalog__{f}" for f in CATALOG_LABEL_FIELDS),
            )
            .order_by("-catalog__imported_at", "-catalog__pk")
            .first()
        )
        if other is None:
            earlier = catalog_versions().filter(_earlier_than(recipe.catalog)).exists()
            return RecipeDiff(status=DiffStatus.NO_EARLIER, earlier_exists=earlier)
        target = other.catalog

    if other.deterministic_yaml == recipe.deterministic_yaml:
        return RecipeDiff(status=DiffStatus.IDENTICAL, against=target, against_raw=raw)
    lines, added, removed = _unified(
        other.deterministic_yaml,
        recipe.deterministic_yaml,
        old_label=f"{recipe.name} (catalog #{target.pk})",
        new_label=f"{recipe.name} (catalog #{recipe.catalog_id})",
    )
    return RecipeDiff(
        status=DiffStatus.CHANGED,
        against=target,
        against_raw=raw,
        lines=lines[:MAX_DIFF_LINES],
        added=added,
        removed=removed,
        truncated=len(lines) > MAX_DIFF_LINES,
    )


def _unified(
    old: str, new: str, *, old_label: str, new_label: str
) -> tuple[list[DiffLine], int, int]:
    lines: list[DiffLine] = []
    added = removed = 0
    for text in difflib.unified_diff(
        old.splitlines(), new.splitlines(), fromfile=old_label, tofile=new_label, lineterm=""
    ):
        if text.startswith(("---", "+++")) and len(lines) < 2:
            kind = "file"
        elif text.startswith("@@"):
            kind = "hunk"
        elif text.startswith("+"):
            kind, added = "add", added + 1
        elif text.startswith("-"):
            kind, removed = "del", removed + 1
        else:
            kind = "ctx"
        lines.append(DiffLine(kind=kind, text=text))
    return lines, added, removed
