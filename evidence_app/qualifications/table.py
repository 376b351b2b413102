"""Qualification rows: the query, and what each cell shows.

A value the bundle does not carry is never invented: it is ``None`` with a reason, "redacted"
where the bundle's ``predicate.redaction`` says AICR's snapshot allowlist removed every reading
it could come from (``attestation.redact.MEASUREMENT_ALLOWLIST``, AICR ``pkg/evidence/redact``),
"not recorded" otherwise. Measured numbers come from the CTRF the bundle carried
(``check_results``); a redacted CTRF has no ``stdout``, so no numbers ("redacted").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypedDict

from django.db.models import Q, QuerySet, TextField, Value
from django.db.models.fields.json import KT
from django.db.models.functions import NullIf

from evidence_app.attestation.redact import MEASUREMENT_ALLOWLIST
from evidence_app.models import Evidence, Verdict, counted_q
from evidence_app.services.staleness import StaleReason, staleness_bulk

NOT_RECORDED = "not recorded"
REDACTED = "redacted"
_SNAPSHOT_ALLOWLIST = "snapshot.measurements.allowlist"
_CTRF_STDOUT_OMITTED = "ctrf.tests.omit:stdout"

# The snapshot readings each identity is read from (coverage.identity.identity_of).
_READINGS: Mapping[str, tuple[tuple[str, str, str], ...]] = {
    "k8s_version": (("K8s", "server", "version"),),
    "gpu_model": (("GPU", "hardware", "model"),),
    "gpu_count": (("GPU", "hardware", "gpu-count"),),
    "instance_type": (("NodeTopology", "label", "node.kubernetes.io/instance-type"),),
    "driver": (("K8s", "policy", "driver.version"), ("K8s", "image", "nvidia-driver")),
    "gpu_operator": (("K8s", "helm", "gpu-operator.version"), ("K8s", "image", "gpu-operator")),
}
COLUMNS = tuple(_READINGS)


def _kept_by_policy(identity: str) -> bool:
    return any(
        key in MEASUREMENT_ALLOWLIST.get(mtype, {}).get(subtype, frozenset())
        for mtype, subtype, key in _READINGS[identity]
    )


# Identities AICR's minimal policy removes from a redacted snapshot: computed from the policy.
REDACTED_BY_POLICY = frozenset(name for name in COLUMNS if not _kept_by_policy(name))


def _applied(predicate: Mapping[str, Any]) -> frozenset[str]:
    redaction = predicate.get("redaction")
    applied = redaction.get("applied") if isinstance(redaction, Mapping) else None
    return (
        frozenset(a for a in applied if isinstance(a, str))
        if isinstance(applied, list)
        else (frozenset())
    )


_TEXT_ANNOTATIONS = ("instance_type", "driver", "gpu_operator")


def _identity_text(name: str) -> NullIf:
    # SQLite reads a JSON null as the text 'null' (PostgreSQL as SQL NULL): both are NULL here,
    # so a value not recorded sorts last, never as the word "null".
    return NullIf(KT(f"identity__{name}"), Value("null"), output_field=TextField())


def qualification_queryset() -> QuerySet[Evidence]:
    """Counted evidence and verified runs on simulated clusters (``QualificationFilter`` keeps
    those only when asked, labelled: they never count), with the signer, the recipe and its
    stored consensus joined and the identity's text columns annotated."""
    simulated = Q(verdict=Verdict.VERIFIED, withdrawn_at__isnull=True, is_simulated=True)
    return (
        Evidence.objects.filter(counted_q() | simulated)
        .select_related("signer", "recipe__consensus")
        .defer("content", "artifact", "transcript", "certificate", "verify_commands")
        .annotate(**{name: _identity_text(name) for name in _TEXT_ANNOTATIONS})
    )


@dataclass(frozen=True)
class Cell:
    value: str | None
    why: str = ""  # NOT_RECORDED or REDACTED when value is None


@dataclass(frozen=True)
class Measure:
    check: str
    label: str
    value: float
    unit: str


@dataclass(frozen=True)
class QualificationRow:
    evidence: Evidence
    cells: Mapping[str, Cell]
    measures: list[Measure]
    measures_why: str  # why there are none: NOT_RECORDED or REDACTED
    state: str  # the recipe's stored consensus state, "" when none is stored
    stale: list[StaleReason]

    @property
    def gpu(self) -> str:
        model, count = self.cells["gpu_model"], self.cells["gpu_count"]
        if model.value is None and count.value is None:
            return ""
        return f"{model.value or '?'} \u00d7 {count.value or '?'}"


def _cells(evidence: Evidence, applied: frozenset[str]) -> dict[str, Cell]:
    identity = evidence.identity or {}
    redacted = _SNAPSHOT_ALLOWLIST in applied
    out = {}
    for name in COLUMNS:
        value = identity.get(name)
        if isinstance(value, str) and value:
            out[name] = Cell(value)
        else:
            why = REDACTED if redacted and name in REDACTED_BY_POLICY else NOT_RECORDED
            out[name] = Cell(None, why)
    return out


def _measures(evidence: Evidence) -> list[Measure]:
    # Read defensively: rows stored by older code (or tests) may hold other shapes, and a page
    # must show what is there rather than fail on what is not.
    results: Mapping[str, Any] = evidence.check_results or {}
    out = []
    for phase in sorted(results):
        checks = results[phase]
        if not isinstance(checks, Mapping):
            continue
        for check in sorted(checks):
            result = checks[check]
            metrics = result.get("metrics") if isinstance(result, Mapping) else None
            for metric in metrics if isinstance(metrics, list) else ():
                value = metric.get("value") if isinstance(metric, Mapping) else None
                if isinstance(value, int | float) and not isinstance(value, bool):
                    unit = metric.get("unit")
                    label = metric.get("label")
                    out.append(
                        Measure(
                            check,
                            label if isinstance(label, str) else "",
                            float(value),
                            unit if isinstance(unit, str) else "",
                        )
                    )
    return out


def qualification_rows(
    evidence: Sequence[Evidence], *, now: datetime | None = None
) -> list[QualificationRow]:
    """Display rows for a page of ``qualification_queryset`` (staleness in a fixed number of
    queries, whatever the page size)."""
    stale = staleness_bulk(evidence, now=now)
    rows = []
    for e in evidence:
        applied = _applied(e.predicate or {})
        measures = _measures(e)
        consensus = getattr(e.recipe, "consensus", None) if e.recipe_id else None
        rows.append(
            QualificationRow(
                evidence=e,
                cells=_cells(e, applied),
                measures=measures,
                measures_why=REDACTED if _CTRF_STDOUT_OMITTED in applied else NOT_RECORDED,
                state=consensus.state if consensus is not None else "",
                stale=stale.get(e.pk, []),
            )
        )
    return rows


class QualificationRecord(TypedDict):
    id: int
    recipe: str
    signer: str
    signer_slug: str
    signer_class: str
    signer_kind: str
    gpu_model: str | None
    gpu_count: str | None
    instance_type: str | None
    k8s_version: str | None
    driver: str | None
    gpu_operator: str | None
    not_recorded: list[str]
    redacted: list[str]
    aicr_version: str
    attested_at: str
    state: str
    stale: list[str]
    is_demo: bool
    is_simulated: bool
    measures: list[str]


def qualification_record(row: QualificationRow) -> QualificationRecord:
    """One flat record (the API item, an NDJSON line, a CSV row): missing values are ``None``,
    named in ``not_recorded`` or ``redacted``."""
    e, cells = row.evidence, row.cells
    return {
        "id": e.pk,
        "recipe": e.recipe_name,
        "signer": e.signer.label,
        "signer_slug": e.signer.slug,
        "signer_class": e.signer.signer_class,
        "signer_kind": e.signer.kind,
        "gpu_model": cells["gpu_model"].value,
        "gpu_count": cells["gpu_count"].value,
        "instance_type": cells["instance_type"].value,
        "k8s_version": cells["k8s_version"].value,
        "driver": cells["driver"].value,
        "gpu_operator": cells["gpu_operator"].value,
        "not_recorded": [n for n, c in cells.items() if c.why == NOT_RECORDED],
        "redacted": [n for n, c in cells.items() if c.why == REDACTED],
        "aicr_version": e.aicr_version,
        "attested_at": e.attested_at.isoformat(),
        "state": row.state,
        "stale": [reason.code for reason in row.stale],
        "is_demo": e.is_demo,
        "is_simulated": e.is_simulated,
        "measures": [
            f"{m.check} {m.label}={m.value:.10g}{' ' + m.unit if m.unit else ''}"
            for m in row.measures
        ],
    }
