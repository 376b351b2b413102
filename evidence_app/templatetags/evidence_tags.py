"""Display helpers for evidence and consensus: CSS classes and symbols, never decisions.

Which evidence counts, its state and its staleness are decided in ``evidence_app.consensus``;
these only map already-decided values to what the page shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import template
from django.utils.html import format_html

from evidence_app import consensus
from evidence_app.models import Evidence
from evidence_app.services.versions import is_release, outside_range_label
from recipes_app.models import Recipe

register = template.Library()

_RESULT_MARKS = {"pass": "✓", "fail": "✗", "not-run": "\u2013"}
_RESULT_LABELS = {"pass": "pass", "fail": "fail", "not-run": "not run"}


@register.filter
def state_class(state: str) -> str:
    """``state--confirmed`` etc.: the badge colour of a consensus state."""
    return "state--" + str(state or "untested").lower()


@register.filter
def state_description(state: str) -> str:
    return consensus.STATE_DESCRIPTIONS.get(str(state), "")


@register.filter
def result_mark(result: str) -> str:
    return _RESULT_MARKS.get(str(result), "?")


@register.filter
def result_label(result: str) -> str:
    return _RESULT_LABELS.get(str(result), str(result))


@register.filter
def number(value: float | int | None) -> str:
    """A measured number as the run printed it: no padding zeros, no rounding away digits."""
    if value is None:
        return ""
    return format(value, ".10g")


@register.filter
def reasons_for(stale: Mapping[int, Any] | None, pk: int) -> Any:
    """The stale reasons of evidence ``pk`` from a selector's ``{pk: [reasons]}`` map."""
    return (stale or {}).get(pk, [])


@register.filter
def step_mark(ok: bool) -> str:
    return "✓" if ok else "✗"


@register.filter
def counts(evidence: Evidence) -> bool:
    """Whether consensus counts this evidence row (``consensus.is_counted``)."""
    return consensus.is_counted(evidence)


@register.simple_tag
def aicr_range_label(version: str, what: str) -> str:
    """A label when ``version`` (a catalog's, a run's) is outside ``AICR_SUPPORTED_RANGE``
    (``services.versions.outside_range_label``); nothing inside it."""
    label = outside_range_label(version, what=what)
    if not label:
        return ""
    why = "" if is_release(version) else " A non-release (dev) cannot be placed in a range."
    return format_html(
        '<span class="badge badge--unsupported" title="Evidence made with an AICR version '
        'outside the range is not counted.{}">{}</span>',
        why,
        label,
    )


@register.filter
def recipe_badge(recipe: Recipe) -> consensus.RecipeBadge:
    """A listed recipe's badge (state, demo, staleness) from its stored row, joined to the list
    query."""
    return consensus.recipe_badge(recipe)
