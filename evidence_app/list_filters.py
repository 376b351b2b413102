"""The evidence list's filters as choices with counts: recipe, signer and verdict.

Every option's count is the number of records the list would show with that option chosen and
the other filters kept (the usual facet rule), so no option promises rows it does not give.
The counts are read from the facet tallies the database keeps per (recipe name, signer,
verdict), per (recipe name, verdict) and per (signer, verdict) (``services.facet_tallies``),
never by grouping the evidence rows (issue 22: that group was 16 s a request at 1,000,000
records): the recipe names' rows (a few per name), the chosen signer's rows, and the signers
with most records from one end of an index. Each filter offers its values with the most
records (``MAX_OPTIONS``) as options; where more values have records, a typed field
(``recipe_other``, ``signer_other``) takes any of them: an exact value, or one a
case-insensitive match of (a signer's label too), else a 400 naming the closest values. Its
``datalist`` is fetched as one types (``suggestions``: the matching values with most records,
with their counts, from the same tallies), so no page carries all 10,000 signers and no value
is out of reach.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db.models import Case, Q, QuerySet, Sum, When

from evidence_app.models import (
    ANY_VERDICT,
    FacetTally,
    RecipeFacetTally,
    SignerFacetTally,
    Verdict,
)

FILTERS = ("recipe", "signer", "verdict")
MAX_VALUE = 200
# Options shown per filter, those with the most records: at 10,000 records (bench/pages.py)
# an option for each of 300 signers and every recipe took the list from 92.5 KB to 114 KB,
# past the 100 KB page budget. The rest stay reachable by URL (a recipe's page links its
# records; a signer's page lists its own).
MAX_OPTIONS = {"recipe": 10, "signer": 10, "verdict": len(Verdict.values)}
# The typed field of a filter with more values than options, and the suggestions it fetches.
OTHER_SUFFIX = "_other"
TYPED = ("recipe", "signer")
MAX_SUGGESTIONS = 20
CLOSE_MATCHES = 5
# A typed signer that matches none is answered with the closest slugs among this many signers
# with most records (difflib over all 10,000 would cost the 400 a second).
CLOSE_CANDIDATES = 1000


@dataclass(frozen=True)
class FilterOption:
    value: str
    label: str
    count: int
    selected: bool


@dataclass(frozen=True)
class ListFilter:
    name: str
    label: str
    total: int  # the "any" option: the records the other filters leave
    options: list[FilterOption]
    left_out: int = 0  # values with records not offered as options: the typed field takes them
    typed: str = ""  # what was typed in it, shown back

    @property
    def other_name(self) -> str:
        return f"{self.name}{OTHER_SUFFIX}"


@dataclass(frozen=True)
class ListFilters:
    chosen: dict[str, str]
    filters: list[ListFilter]
    errors: list[str]
    shown: int = 0  # the records the chosen filters leave: the list's count, from the tallies


def chosen_filters(params: Mapping[str, Any]) -> tuple[dict[str, str], list[str]]:
    """The non-empty filters of ``params``; a verdict that is none of the verdicts is an
    error naming it (a recipe or signer nobody has is a valid, empty choice)."""
    chosen = {}
    errors = []
    for name in FILTERS:
        value = str(params.get(name) or "").strip()[:MAX_VALUE]
        if not value:
            continue
        if name == "verdict" and value not in Verdict.values:
            errors.append(f"verdict: {value[:50]!r} is not one of {', '.join(Verdict.values)}.")
            continue
        chosen[name] = value
    return chosen, errors


def typed_filters(params: Mapping[str, Any]) -> dict[str, str]:
    """The non-empty typed fields of ``params`` (``recipe_other``, ``signer_other``): each
    wins over its select (whose "any" stays selected while one types)."""
    typed = {}
    for name in TYPED:
        value = str(params.get(f"{name}{OTHER_SUFFIX}") or "").strip()[:MAX_VALUE]
        if value:
            typed[name] = value
    return typed


def _resolve_typed(
    name: str, typed: str, labels: Mapping[str, str], errors: list[str]
) -> str | None:
    """The value a typed ``name`` means: itself, or its one case-insensitive match among the
    values with records (a signer's label too); None, with an error naming the closest values,
    when it matches none."""
    if typed in labels:
        return typed
    folded = typed.casefold()
    matches = sorted(
        {v for v, label in labels.items() if folded in (v.casefold(), label.casefold())}
    )
    if len(matches) == 1:
        return matches[0]
    close = difflib.get_close_matches(typed, list(labels), n=CLOSE_MATCHES, cutoff=0.6)
    hint = f" Closest: {', '.join(close)}." if close else ""
    errors.append(f"{name}: no evidence record has {typed[:50]!r}.{hint}")
    return None


def _recipe_tallies() -> dict[tuple[str, str], int]:
    """``{(recipe name, verdict): records}`` of every recipe name with records, ``verdict=""``
    for all its records (``RecipeFacetTally`` summed over its stripes: at most a few hundred
    rows per recipe name, whatever the number of records)."""
    rows = (
        RecipeFacetTally.objects.filter(records__gt=0)
        .values_list("recipe_name", "verdict")
        .annotate(n=Sum("records"))
        .order_by()
    )
    return {(recipe, verdict): n for recipe, verdict, n in rows}


def _signer_tallies(slug: str) -> tuple[dict[tuple[str, str], int], str]:
    """One signer's ``{(recipe name, verdict): records}`` and its label (``FacetTally``: at
    most a few rows per recipe name); the slug itself for a signer without records."""
    rows = list(
        FacetTally.objects.filter(signer__slug=slug, records__gt=0).values_list(
            "recipe_name", "verdict", "records", "signer__label"
        )
    )
    label = next((row[3] for row in rows if row[3]), slug)
    return {(recipe, verdict): n for recipe, verdict, n, _label in rows}, label


def _top_signers(recipe: str | None, verdict: str | None) -> tuple[list[tuple[str, str, int]], int]:
    """The ``MAX_OPTIONS`` signers with most records under the chosen recipe and verdict, as
    ``(slug, label, records)``, read from one end of an index (``FacetTally`` for a recipe,
    ``SignerFacetTally`` else), and how many signers have records there (an index count)."""
    rows: QuerySet[Any]
    if recipe is not None:
        rows = FacetTally.objects.filter(recipe_name=recipe)
    else:
        rows = SignerFacetTally.objects.all()
    rows = rows.filter(verdict=verdict or ANY_VERDICT, records__gt=0)
    top = rows.order_by("-records", "signer_id").values_list(
        "signer__slug", "signer__label", "records"
    )[: MAX_OPTIONS["signer"]]
    return [(slug, label or slug, n) for slug, label, n in top], rows.count()


def _resolve_signer(typed: str, errors: list[str]) -> str | None:
    """``_resolve_typed`` for a signer, asked of the database: its slug, or the one signer
    with records whose slug or label it is (case aside); else an error naming the closest
    slugs among the ``CLOSE_CANDIDATES`` signers with most records."""
    with_records = SignerFacetTally.objects.filter(verdict=ANY_VERDICT, records__gt=0)
    matches = list(
        with_records.filter(
            Q(signer__slug=typed) | Q(signer__slug__iexact=typed) | Q(signer__label__iexact=typed)
        )
        .order_by(Case(When(signer__slug=typed, then=0), default=1), "signer__slug")
        .values_list("signer__slug", flat=True)[:2]
    )
    if matches and (matches[0] == typed or len(matches) == 1):
        return matches[0]
    candidates = with_records.order_by("-records", "signer_id").values_list(
        "signer__slug", flat=True
    )[:CLOSE_CANDIDATES]
    close = difflib.get_close_matches(typed, list(candidates), n=CLOSE_MATCHES, cutoff=0.6)
    hint = f" Closest: {', '.join(close)}." if close else ""
    errors.append(f"signer: no evidence record has {typed[:50]!r}.{hint}")
    return None


def suggestions(name: str, typed: str) -> list[tuple[str, str, int]]:
    """``(value, label, records)`` of the ``name`` values containing ``typed`` (a signer's
    label too), most records first: the typed field's datalist. One query over the
    tallies (a row per recipe name or per signer, never per record), at most
    ``MAX_SUGGESTIONS`` rows."""
    if name not in TYPED:
        return []
    typed = typed.strip()[:MAX_VALUE]
    if name == "recipe":
        recipes = (
            RecipeFacetTally.objects.filter(
                verdict=ANY_VERDICT, records__gt=0, recipe_name__icontains=typed
            )
            .values_list("recipe_name")
            .annotate(n=Sum("records"))
            .order_by("-n", "recipe_name")
        )
        found = recipes[:MAX_SUGGESTIONS]
        return [(value, value, n) for value, n in found]
    signers = (
        SignerFacetTally.objects.filter(verdict=ANY_VERDICT, records__gt=0)
        .filter(Q(signer__slug__icontains=typed) | Q(signer__label__icontains=typed))
        .order_by("-records", "signer__slug")
        .values_list("signer__slug", "signer__label", "records")
    )
    return [(slug, label or slug, n) for slug, label, n in signers[:MAX_SUGGESTIONS]]


def _add(counter: Counter[str], key: str, n: int) -> None:
    if n > 0:
        counter[key] += n


def list_filters(
    chosen: Mapping[str, str], errors: list[str], typed: Mapping[str, str] | None = None
) -> ListFilters:
    """Every filter's options with their counts under the other chosen filters, read from
    the facet tallies (``services.facet_tallies``): the recipe names' rows, the chosen
    signer's rows, and the top signers with their number; at most 6 queries, none of them
    over the evidence rows. ``typed``: the values that came from a typed field (checked
    against the values with records, ``_resolve_typed``)."""
    recipes = _recipe_tallies()
    chosen = dict(chosen)
    known = {recipe: recipe for recipe, verdict in recipes if verdict == ANY_VERDICT}
    for name, value in (typed or {}).items():
        if name == "recipe":
            resolved = _resolve_typed(name, value, known, errors)
        else:
            resolved = _resolve_signer(value, errors)
        if resolved is None:
            chosen.pop(name, None)
        else:
            chosen[name] = resolved
    recipe, signer, verdict = (chosen.get(name) for name in FILTERS)
    # (recipe, verdict) → records under the signer filter: the chosen signer's rows, or all.
    grid, signer_label = _signer_tallies(signer) if signer else (recipes, "")
    counts: dict[str, Counter[str]] = {name: Counter() for name in FILTERS}
    for (name, v), n in grid.items():
        if v == (verdict or ANY_VERDICT):
            _add(counts["recipe"], name, n)
        if v != ANY_VERDICT and recipe in (None, name):
            _add(counts["verdict"], v, n)
    top, with_records = _top_signers(recipe, verdict)
    labels: dict[str, dict[str, str]] = {
        "verdict": {str(v): str(label) for v, label in Verdict.choices},
        "signer": {slug: label for slug, label, _n in top},
        "recipe": {},
    }
    for slug, _label, n in top:
        _add(counts["signer"], slug, n)
    if signer and signer not in counts["signer"]:  # chosen, not among the top: its own count
        labels["signer"][signer] = signer_label
        mine = counts["recipe"][recipe] if recipe else sum(counts["recipe"].values())
        _add(counts["signer"], signer, mine)
    any_verdict = verdict or ANY_VERDICT
    totals = {
        "recipe": sum(counts["recipe"].values()),
        "signer": recipes.get((recipe, any_verdict), 0)
        if recipe
        else sum(n for (_r, v), n in recipes.items() if v == any_verdict),
        "verdict": sum(counts["verdict"].values()),
    }
    distinct = {"recipe": len(counts["recipe"]), "signer": with_records, "verdict": 0}
    filters = []
    for name, label in (("recipe", "Recipe"), ("signer", "Signer"), ("verdict", "Verdict")):
        names = labels[name]
        offered = [v for v, _n in sorted(counts[name].items(), key=lambda i: (-i[1], i[0]))]
        offered = offered[: MAX_OPTIONS[name]]
        if name == "signer":
            offered = [slug for slug, _label, _n in top]  # the index's order
        left_out = max(0, distinct[name] - len(offered)) if name != "verdict" else 0
        values = sorted(offered, key=lambda v: (names.get(v) or v).lower())
        if name == "verdict":
            values = [v for v in Verdict.values if v in counts[name]]
        if chosen.get(name) and chosen[name] not in values:
            values.insert(0, chosen[name])  # still shown chosen (with its count, maybe 0)
        options = [
            FilterOption(
                value=v,
                label=labels[name].get(v, v),
                count=counts[name][v],
                selected=chosen.get(name) == v,
            )
            for v in values
        ]
        shown_typed = (typed or {}).get(name, "")
        filters.append(ListFilter(name, label, totals[name], options, left_out, shown_typed))
    shown = counts["verdict"][verdict] if verdict else totals["verdict"]
    return ListFilters(chosen=chosen, filters=filters, errors=errors, shown=shown)
