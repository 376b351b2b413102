"""The evidence list's filters as choices with counts: recipe, signer and verdict.

One grouped query reads how many records each (recipe, signer, verdict) combination has; every
option's count is then the number of records the list would show with that option chosen and
the other filters kept (the usual facet rule), so no option promises rows it does not give.
Each filter offers its values with the most records (``MAX_OPTIONS``) as options; where more
values have records, a typed field (``recipe_other``, ``signer_other``) takes any of them: an
exact value, or one a case-insensitive match of (a signer's label too), else a 400 naming the
closest values. Its ``datalist`` is fetched as one types (``suggestions``: the matching values
with most records, with their counts), so no page carries all 10,000 signers and no value is
out of reach. The query returns one row per combination that has records (never more rows
than records) and reads no stored bytes.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Q

from evidence_app.models import Evidence, Verdict

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


def suggestions(name: str, typed: str) -> list[tuple[str, str, int]]:
    """``(value, label, records)`` of the ``name`` values containing ``typed`` (a signer's
    label too), most records first: the typed field's datalist. One query, at most
    ``MAX_SUGGESTIONS`` rows."""
    if name not in TYPED:
        return []
    typed = typed.strip()[:MAX_VALUE]
    if name == "recipe":
        recipes = (
            Evidence.objects.order_by()
            .filter(recipe_name__icontains=typed)
            .values_list("recipe_name")
            .annotate(n=Count("pk"))
            .order_by("-n", "recipe_name")
        )
        return [(value, value, n) for value, n in recipes[:MAX_SUGGESTIONS]]
    signers = (
        Evidence.objects.order_by()
        .filter(Q(signer__slug__icontains=typed) | Q(signer__label__icontains=typed))
        .values_list("signer__slug", "signer__label")
        .annotate(n=Count("pk"))
        .order_by("-n", "signer__slug")
    )
    return [(slug, label or slug, n) for slug, label, n in signers[:MAX_SUGGESTIONS]]


def list_filters(
    chosen: Mapping[str, str], errors: list[str], typed: Mapping[str, str] | None = None
) -> ListFilters:
    """Every filter's options with their counts under the other chosen filters. One query.
    ``typed``: the values that came from a typed field (checked against the values with
    records, ``_resolve_typed``)."""
    rows = list(
        Evidence.objects.order_by()
        .values_list("recipe_name", "signer__slug", "signer__label", "verdict")
        .annotate(n=Count("pk"))
    )
    chosen = dict(chosen)
    known: dict[str, dict[str, str]] = {"recipe": {}, "signer": {}}
    for recipe, slug, signer_label, _verdict, _n in rows:
        known["recipe"][recipe] = recipe
        known["signer"][slug] = signer_label or slug
    for name, value in (typed or {}).items():
        resolved = _resolve_typed(name, value, known[name], errors)
        if resolved is None:
            chosen.pop(name, None)
        else:
            chosen[name] = resolved
    labels: dict[str, dict[str, str]] = {
        "verdict": {str(v): str(label) for v, label in Verdict.choices},
        "signer": {},
        "recipe": {},
    }
    counts: dict[str, Counter[str]] = {name: Counter() for name in FILTERS}
    totals: Counter[str] = Counter()
    for recipe, slug, signer_label, verdict, n in rows:
        row = {"recipe": recipe, "signer": slug, "verdict": verdict}
        labels["signer"][slug] = signer_label or slug
        for name in FILTERS:
            others = all(row[o] == chosen[o] for o in FILTERS if o != name and o in chosen)
            if others:
                counts[name][row[name]] += n
                totals[name] += n
    filters = []
    for name, label in (("recipe", "Recipe"), ("signer", "Signer"), ("verdict", "Verdict")):
        names = labels[name]
        offered = [v for v, _n in counts[name].most_common(MAX_OPTIONS[name])]
        left_out = len(counts[name]) - len(offered)
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
    return ListFilters(chosen=chosen, filters=filters, errors=errors)
