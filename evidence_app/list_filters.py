"""The evidence list's filters as choices with counts: recipe, signer and verdict.

One grouped query reads how many records each (recipe, signer, verdict) combination has; every
option's count is then the number of records the list would show with that option chosen and
the other filters kept (the usual facet rule), so no option promises rows it does not give.
Each filter offers its values with the most records (``MAX_OPTIONS``). The query returns one
row per combination that has records (never more rows than records) and reads no stored bytes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db.models import Count

from evidence_app.models import Evidence, Verdict

FILTERS = ("recipe", "signer", "verdict")
MAX_VALUE = 200
# Options shown per filter, those with the most records: at 10,000 records (bench/pages.py)
# an option for each of 300 signers and every recipe took the list from 92.5 KB to 114 KB,
# past the 100 KB page budget. The rest stay reachable by URL (a recipe's page links its
# records; a signer's page lists its own).
MAX_OPTIONS = {"recipe": 15, "signer": 15, "verdict": len(Verdict.values)}


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
    left_out: int = 0  # values with records not offered (MAX_OPTIONS)


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


def list_filters(chosen: Mapping[str, str], errors: list[str]) -> ListFilters:
    """Every filter's options with their counts under the other chosen filters. One query."""
    rows = (
        Evidence.objects.order_by()
        .values_list("recipe_name", "signer__slug", "signer__label", "verdict")
        .annotate(n=Count("pk"))
    )
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
        filters.append(ListFilter(name, label, totals[name], options, left_out))
    return ListFilters(chosen=dict(chosen), filters=filters, errors=errors)
