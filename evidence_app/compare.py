"""Two evidence records of one recipe, side by side: what differs between two validations.

``evidence_compare`` reads both records and lines up, row by row, what a person compares: the
records themselves (signer, versions, when, status), the identities the coverage check compares
(``coverage.identity``: Kubernetes, OS, kernel, GPU, driver, operators, node image, instance
type, AICR version), the components of the recipe each record's signed digest binds to (the BOM
``aicr validate`` writes is made from them), every check's result and every number a check
printed. Each row says whether the two sides differ, so a page can mark it in words, not colour
alone. An identity a record does not record is "not recorded", never equal to anything.

Records of different recipes are refused (``CompareError``); a withdrawn record is compared and
shown as withdrawn. A fixed number of queries whatever the records hold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from evidence_app.consensus.outcomes import CheckOutcome, Metric, check_outcomes
from evidence_app.consensus.rules import evidence_standing, is_counted, signer_group
from evidence_app.coverage.identity import IDENTITIES
from evidence_app.coverage.service import evidence_identities
from evidence_app.models import Evidence, Verdict
from evidence_app.services.staleness import StaleReason, staleness_bulk

# The picker lists this many other records of the recipe, newest first.
CANDIDATES_SHOWN = 50
NOT_RECORDED = "not recorded"

ErrorKind = Literal["bad-id", "not-found", "different-recipes"]


class CompareError(Exception):
    """The two ids cannot be compared; ``kind`` says why, ``message`` names what is wrong."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass(frozen=True)
class Side:
    evidence: Evidence
    stale: list[StaleReason]
    counted: bool

    @property
    def status(self) -> str:
        """The record's standing in words (what a person must know before trusting a row)."""
        standing = evidence_standing(self.evidence)
        if standing != "withdrawn" and self.evidence.verdict != Verdict.VERIFIED:
            return self.evidence.get_verdict_display().lower()
        return {
            "simulated": "simulated, not counted",
            "reported": "reported, not counted",
            "unsupported": "outside the supported AICR range, not counted",
        }.get(standing, standing)


@dataclass(frozen=True)
class ValueRow:
    label: str
    a: str
    b: str

    @property
    def differs(self) -> bool:
        return self.a != self.b


@dataclass(frozen=True)
class CheckRow:
    phase: str
    name: str
    a: CheckOutcome | None  # None: the record has no result for this check
    b: CheckOutcome | None

    @property
    def differs(self) -> bool:
        return _result(self.a) != _result(self.b)

    @property
    def sides(self) -> tuple[CheckOutcome | None, CheckOutcome | None]:
        return (self.a, self.b)


@dataclass(frozen=True)
class MetricRow:
    phase: str
    check: str
    label: str
    unit: str
    a: float | None
    b: float | None

    @property
    def differs(self) -> bool:
        return self.a != self.b

    @property
    def change(self) -> str:
        """b against a, in percent where both are numbers and a is not zero."""
        if self.a is None or self.b is None:
            return ""
        if self.a == self.b:
            return "same"
        if self.a == 0:
            return f"{self.b - self.a:+g}"
        return f"{(self.b - self.a) / abs(self.a) * 100:+.1f} %"


@dataclass(frozen=True)
class Comparison:
    a: Side
    b: Side
    records: list[ValueRow]
    identities: list[ValueRow]
    components: list[ValueRow]
    checks: list[CheckRow]
    metrics: list[MetricRow]
    same_recipe_digest: bool

    @property
    def sides(self) -> tuple[Side, Side]:
        return (self.a, self.b)

    @property
    def difference_count(self) -> int:
        rows: Sequence[ValueRow | CheckRow | MetricRow] = [
            *self.identities,
            *self.components,
            *self.checks,
            *self.metrics,
        ]
        return sum(1 for row in rows if row.differs)


def _result(outcome: CheckOutcome | None) -> str:
    return outcome.result if outcome is not None else "absent"


def parse_id(raw: Any, *, parameter: str) -> int:
    """A positive integer id from a query parameter, or ``CompareError`` naming it."""
    text = str(raw or "").strip()
    if not text:
        raise CompareError("bad-id", f"Parameter “{parameter}” is missing: give an evidence id.")
    if not text.isascii() or not text.isdigit() or len(text) > 18 or int(text) == 0:
        raise CompareError(
            "bad-id", f"Parameter “{parameter}” must be an evidence id (a positive number)."
        )
    return int(text)


def _load(ids: Sequence[int]) -> dict[int, Evidence]:
    rows = (
        Evidence.objects.select_related("signer", "recipe", "recipe__catalog")
        .defer(
            "content",
            "artifact",
            "transcript",
            "certificate",
            "recipe__deterministic_yaml",
            "recipe__canonical_yaml",
            "recipe__search_text",
            "recipe__catalog__files",
        )
        .filter(pk__in=ids)
    )
    return {e.pk: e for e in rows}


def _record_rows(a: Evidence, b: Evidence, sa: Side, sb: Side) -> list[ValueRow]:
    def row(label: str, get: Any) -> ValueRow:
        return ValueRow(label, str(get(a)), str(get(b)))

    return [
        row("Signer", lambda e: e.signer.label),
        row("Signer group", lambda e: signer_group(e.signer)),
        ValueRow("Status", sa.status, sb.status),
        ValueRow(
            "Stale",
            ", ".join(r.code for r in sa.stale) or "no",
            ", ".join(r.code for r in sb.stale) or "no",
        ),
        row("Attested at (claimed)", lambda e: e.attested_at.strftime("%Y-%m-%d %H:%M UTC")),
        row("Recipe digest (verified)", lambda e: e.subject_digest),
        row("Catalog", lambda e: f"#{e.recipe.catalog_id} · AICR {e.recipe.catalog.aicr_version}"),
        row("AICR version", lambda e: e.aicr_version or "—"),
        row("Validator catalog", lambda e: e.validator_catalog_version or "—"),
        row("Demo key", lambda e: "yes" if e.is_demo else "no"),
    ]


def _identity_rows(a: Mapping[str, str | None], b: Mapping[str, str | None]) -> list[ValueRow]:
    # "not recorded" on both sides is not a match either: such a row is equal text, yet the
    # page says neither records it (``ValueRow.differs`` is about the text shown).
    return [
        ValueRow(label, a.get(key) or NOT_RECORDED, b.get(key) or NOT_RECORDED)
        for key, label in IDENTITIES
    ]


def _component_versions(recipe_components: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for component in recipe_components if isinstance(recipe_components, list) else ():
        if not isinstance(component, Mapping) or not isinstance(component.get("name"), str):
            continue
        version = component.get("version") or component.get("tag") or ""
        chart = component.get("chart") or component.get("source") or ""
        text = " ".join(str(part) for part in (chart, version) if part) or "no version"
        if component.get("enabled") is False:
            text += " (disabled)"
        out[component["name"]] = text
    return out


def _component_rows(a: Evidence, b: Evidence) -> list[ValueRow]:
    left = _component_versions(a.recipe.components)
    right = _component_versions(b.recipe.components)
    names = list(left) + [name for name in right if name not in left]
    return [ValueRow(name, left.get(name, "absent"), right.get(name, "absent")) for name in names]


def _check_rows(
    a: Mapping[str, Mapping[str, CheckOutcome]], b: Mapping[str, Mapping[str, CheckOutcome]]
) -> list[CheckRow]:
    phases = sorted({*a, *b}, key=lambda p: (_PHASE_RANK.get(p, 99), p))
    rows = []
    for phase in phases:
        left, right = a.get(phase, {}), b.get(phase, {})
        for name in sorted({*left, *right}):
            rows.append(CheckRow(phase, name, left.get(name), right.get(name)))
    return rows


_PHASE_RANK = {"readiness": 0, "deployment": 1, "conformance": 2, "performance": 3}


def _metric_map(outcome: CheckOutcome | None) -> dict[tuple[str, str], Metric]:
    if outcome is None:
        return {}
    out: dict[tuple[str, str], Metric] = {}
    for metric in outcome.metrics:
        out.setdefault((metric.label, metric.unit), metric)
    return out


def _metric_rows(checks: Sequence[CheckRow]) -> list[MetricRow]:
    rows = []
    for check in checks:
        left, right = _metric_map(check.a), _metric_map(check.b)
        for key in list(left) + [k for k in right if k not in left]:
            la, rb = left.get(key), right.get(key)
            rows.append(
                MetricRow(
                    phase=check.phase,
                    check=check.name,
                    label=key[0],
                    unit=key[1],
                    a=la.value if la is not None else None,
                    b=rb.value if rb is not None else None,
                )
            )
    return rows


def compare_first(*, a_id: int) -> Evidence:
    """Record ``a_id``, chosen before its second: ``CompareError`` naming it when it is unknown."""
    found = _load([a_id])
    if a_id not in found:
        raise CompareError("not-found", f"No evidence #{a_id}.")
    return found[a_id]


def evidence_compare(*, a_id: int, b_id: int) -> Comparison:
    """Records ``a_id`` and ``b_id`` side by side; ``CompareError`` when they cannot be."""
    if a_id == b_id:
        raise CompareError("bad-id", "Parameters “a” and “b” name the same record: pick two.")
    found = _load([a_id, b_id])
    missing = [f"#{pk}" for pk in (a_id, b_id) if pk not in found]
    if missing:
        raise CompareError("not-found", f"No evidence {' or '.join(missing)}.")
    a, b = found[a_id], found[b_id]
    if a.recipe_name != b.recipe_name:
        raise CompareError(
            "different-recipes",
            f"Evidence #{a.pk} is for recipe “{a.recipe_name}” and #{b.pk} for "
            f"“{b.recipe_name}”: only records of one recipe can be compared.",
        )
    stale = staleness_bulk([a, b])
    sa = Side(a, stale.get(a.pk, []), is_counted(a))
    sb = Side(b, stale.get(b.pk, []), is_counted(b))
    identities = evidence_identities([(a.pk, a.sha256), (b.pk, b.sha256)])
    checks = _check_rows(check_outcomes(a.check_results), check_outcomes(b.check_results))
    return Comparison(
        a=sa,
        b=sb,
        records=_record_rows(a, b, sa, sb),
        identities=_identity_rows(identities.get(a.pk, {}), identities.get(b.pk, {})),
        components=_component_rows(a, b),
        checks=checks,
        metrics=_metric_rows(checks),
        same_recipe_digest=a.subject_digest == b.subject_digest,
    )


@dataclass(frozen=True)
class Candidate:
    pk: int
    label: str


def compare_candidates(*, recipe_name: str, chosen: Sequence[Evidence] = ()) -> list[Candidate]:
    """The newest records of a recipe for the pickers (one query), with the ``chosen`` ones
    even when they are older than the newest ``CANDIDATES_SHOWN``."""
    rows = (
        Evidence.objects.filter(recipe_name=recipe_name)
        .order_by("-attested_at", "-pk")
        .values_list("pk", "attested_at", "signer__label", "aicr_version", "withdrawn_at")[
            :CANDIDATES_SHOWN
        ]
    )
    out = [_candidate(*row) for row in rows]
    listed = {c.pk for c in out}
    for e in chosen:
        if e.pk not in listed:
            out.append(
                _candidate(e.pk, e.attested_at, e.signer.label, e.aicr_version, e.withdrawn_at)
            )
    return out


def _candidate(
    pk: int, attested: datetime, label: str, version: str, withdrawn: datetime | None
) -> Candidate:
    text = f"#{pk} · {attested:%Y-%m-%d} · {label[:60]} · AICR {version or '?'}"
    return Candidate(pk, text + (" · withdrawn" if withdrawn else ""))
