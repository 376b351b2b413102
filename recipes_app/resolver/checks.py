"""Declared validation checks of a resolved recipe and the thresholds that parameterise them.

AICR.md §1.5/§1.6: a recipe's ``validation.<phase>.checks`` names validators from the catalog;
the same phase's ``constraints`` are their parameters/thresholds, named after the check or after
a deployment measurement. Nothing in the document links a constraint to its check explicitly, so
``declared_checks`` applies this rule, per phase, to each constraint name ``N``:

1. ``N`` equals a declared check name (``nccl-all-reduce-bw``, ``nccl-all-reduce-bw-nvls``);
2. ``N`` is a deployment measurement ``Deployment.<component>.<key>`` and ``<component>-<key>``
   is a declared check (``Deployment.gpu-operator.version`` → ``gpu-operator-version``);
3. ``N`` starts with ``<check>-`` for a declared check (longest such check wins), so a
   ``nccl-all-reduce-bw-min``-style parameter attaches to ``nccl-all-reduce-bw``;
4. ``N``'s first hyphen-separated word equals the first word of exactly one declared check in
   the phase (``inference-throughput``, ``inference-ttft-p99``, ``inference-model`` →
   ``inference-perf``).

A constraint matched by none of the rules (or ambiguous under rule 4) is not attributed to any
check. Readiness constraints are recipe-level gates, not check thresholds, and readiness never
declares checks, so it only appears if a recipe ever lists readiness checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from .model import PHASES


class Threshold(TypedDict):
    """A recipe constraint that sets a check's pass mark, e.g. ``inference-throughput >= 50000``."""

    name: str
    value: str


class DeclaredCheck(TypedDict):
    name: str
    thresholds: list[Threshold]


# ``{phase: [check, ...]}`` in recipe order (``Recipe.checks``).
type DeclaredChecks = dict[str, list[DeclaredCheck]]


def threshold_owner(constraint: str, checks: list[str]) -> str | None:
    """The declared check a validation-phase constraint parameterises (rule above), or None."""
    if constraint in checks:
        return constraint
    if constraint.startswith("Deployment."):
        parts = constraint.split(".")
        if len(parts) == 3:
            candidate = f"{parts[1]}-{parts[2]}"
            if candidate in checks:
                return candidate
    prefixed = [c for c in checks if constraint.startswith(c + "-")]
    if prefixed:
        return max(prefixed, key=len)
    word = constraint.split("-", 1)[0]
    if word and word != constraint:
        family = [c for c in checks if c.split("-", 1)[0] == word]
        if len(family) == 1:
            return family[0]
    return None


def declared_checks(doc: Mapping[str, Any]) -> DeclaredChecks:
    """Per phase, the declared checks in recipe order with their thresholds.

    ``{"performance": [{"name": "inference-perf", "thresholds": [{"name":
    "inference-throughput", "value": ">= 50000"}, ...]}], ...}``; phases without checks are
    left out; thresholds keep the recipe's constraint order.
    """
    validation = doc.get("validation") or {}
    out: DeclaredChecks = {}
    for phase in PHASES:
        block = validation.get(phase) or {}
        checks = [str(c) for c in block.get("checks") or []]
        if not checks:
            continue
        entries = {c: DeclaredCheck(name=c, thresholds=[]) for c in checks}
        for constraint in block.get("constraints") or []:
            name = str(constraint.get("name", ""))
            owner = threshold_owner(name, checks)
            if owner is not None:
                entries[owner]["thresholds"].append(
                    Threshold(name=name, value=str(constraint.get("value", "")))
                )
        out[phase] = list(entries.values())
    return out
