"""What ``/check/`` tells a person beyond the verdict: the criteria they may pick, the suggested
completions as links, the verdict as a sentence, and what to run next.

The criteria choices are the current catalog's ``Catalog.criteria_values`` (what its AICR
generation's enums and its overlays accept, stored at import), so a select never offers a value
the resolver would refuse and never hides one it accepts. The completions are AICR's own
``validCompletions`` (``pkg/recipe/metadata_store.go``, ``verifyCriteriaCoverage``) merged
with the criteria already in force. The commands are AICR's CLI surface
(``pkg/cli/testdata/cli-surface.golden``: ``aicr snapshot --output``, ``aicr recipe --service …
--output``, ``aicr validate --recipe … --emit-attestation``).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlencode

from django.urls import reverse

from recipes_app.models import ANY, Catalog, Recipe

from .identity import LABELS
from .service import STATED_DIMENSIONS, CheckResult

SNAPSHOT_COMMAND = "aicr snapshot --output snapshot.yaml"


def criteria_choices() -> dict[str, list[str]]:
    """Dimension → the values the current catalog accepts (``any`` excluded); empty without a
    catalog. One query."""
    row = Catalog.objects.only("criteria_values").newest_first().first()
    values = row.criteria_values if row is not None else {}
    return {d: [str(v) for v in values.get(d, []) if v != ANY] for d in STATED_DIMENSIONS}


@dataclass(frozen=True)
class Completion:
    """One of AICR's suggested criteria combinations, completed with the criteria in force."""

    label: str  # "accelerator=h100, intent=training"
    criteria: dict[str, str]
    check_url: str  # /check/ with the completed criteria chosen
    recipe: str | None  # the catalog recipe those criteria name exactly, if any


def _completion_criteria(base: Mapping[str, str], label: str) -> dict[str, str]:
    completed = {d: v for d, v in base.items() if v and v != ANY}
    for part in label.split(","):
        dimension, _, value = part.strip().partition("=")
        if dimension in STATED_DIMENSIONS and value:
            completed[dimension] = value
    return {d: completed[d] for d in STATED_DIMENSIONS if d in completed}


def check_url(criteria: Mapping[str, str]) -> str:
    """``/check/`` with ``criteria`` chosen in the form (the snapshot is pasted again)."""
    return reverse("check") + "?" + urlencode(criteria)


def completions(result: CheckResult) -> list[Completion]:
    """Every suggested completion of ``result``, each with its links; one query for the lot."""
    labels = [c for options in result.valid_completions.values() for c in options]
    if not labels:
        return []
    wanted = {
        label: _completion_criteria(result.criteria, label) for label in dict.fromkeys(labels)
    }
    recipes = {
        tuple(getattr(r, d) for d in STATED_DIMENSIONS): r.name
        for r in Recipe.objects.current().filter(profile="").only("name", *STATED_DIMENSIONS)
    }
    out = []
    for label, criteria in wanted.items():
        key = tuple(criteria.get(d, ANY) for d in STATED_DIMENSIONS)
        out.append(Completion(label, criteria, check_url(criteria), recipes.get(key)))
    return out


def sentence(verdict: str) -> str:
    """The service's verdict as a sentence: first letter capital, a full stop."""
    if not verdict:
        return ""
    text = verdict[0].upper() + verdict[1:]
    return text if text.endswith(".") else text + "."


@dataclass(frozen=True)
class NextStep:
    text: str
    command: str = ""


def _recipe_command(criteria: Mapping[str, str]) -> str:
    parts = ["aicr", "recipe"]
    for dimension in STATED_DIMENSIONS:
        value = criteria.get(dimension)
        if value and value != ANY:
            parts += [f"--{dimension}", shlex.quote(value)]
    return " ".join([*parts, "--output", "recipe.yaml"])


VALIDATE_COMMAND = "aicr validate --recipe recipe.yaml --emit-attestation ./out"


def _produce_evidence(result: CheckResult, why: str) -> list[NextStep]:
    return [
        NextStep(f"{why} Write the recipe for your criteria:", _recipe_command(result.criteria)),
        NextStep(
            "Validate your cluster against it and keep the signed evidence, then upload "
            "./out/summary-bundle packed as a tarball:",
            VALIDATE_COMMAND,
        ),
    ]


def _names(keys: Sequence[str]) -> str:
    return ", ".join(LABELS[k] for k in LABELS if k in keys)


def next_steps(result: CheckResult) -> list[NextStep]:
    """What to run next for this result, in order; [] when the evidence covers the cluster."""
    if result.covered:
        return []
    if result.recipe is None:
        if result.constraint_warnings:
            return [
                NextStep(
                    "Bring the cluster within the failing constraints below, then take a new "
                    "snapshot and check it again:",
                    SNAPSHOT_COMMAND,
                )
            ]
        if result.valid_completions:
            return [NextStep("Choose one of the suggested criteria combinations below.")]
        return [NextStep("Choose the criteria the snapshot does not tell, then check again.")]
    steps: list[NextStep] = []
    failing = [c.name for c in result.constraints if not c.ok]
    if failing:
        steps.append(
            NextStep(
                f"Fix the failing readiness constraints ({', '.join(failing)}), then take a new "
                "snapshot:",
                SNAPSHOT_COMMAND,
            )
        )
    if not result.evidence:
        return steps + _produce_evidence(
            result, f"No one has published evidence for {result.recipe}."
        )
    if any(e.exact for e in result.evidence):
        return steps
    unrecorded = sorted({k for e in result.evidence if not e.differs for k in e.not_in_snapshot})
    if unrecorded:
        steps.append(
            NextStep(
                f"Your snapshot does not record {_names(unrecorded)}: take it again with the "
                "AICR version the evidence used, so the check can compare them:",
                SNAPSHOT_COMMAND,
            )
        )
    return steps + _produce_evidence(
        result, "No evidence was made on exactly your cluster's tuple; yours would be the first."
    )


def prefill(
    params: Mapping[str, str], choices: Mapping[str, list[str]]
) -> tuple[dict[str, str], list[str]]:
    """The criteria a ``/check/?service=…`` link chooses in the form, and a message for each
    value the current catalog does not accept (it is left at "any")."""
    initial: dict[str, str] = {}
    refused = []
    for dimension in STATED_DIMENSIONS:
        value = str(params.get(dimension) or "").strip()
        if not value or value == ANY:
            continue
        if value in choices.get(dimension, []):
            initial[dimension] = value
        else:
            refused.append(
                f"{dimension}: {value[:100]!r} is not a value the current catalog accepts; "
                "left at any."
            )
    return initial, refused
