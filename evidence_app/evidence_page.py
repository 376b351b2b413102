"""What the page of one piece of evidence shows (``views.evidence_detail``), and the API's
verified/claimed lists (``api.serializers``).

Presentation of already-verified values: the auditor's verify commands, the certificate's
claims, the fingerprint against the recipe's criteria, each check with its declared thresholds,
and what this site verified itself against what the signer only claims. Nothing here decides
what counts (``evidence_app.consensus``) or whether a signature holds (``verification``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from django.urls import reverse

from evidence_app.consensus.outcomes import (
    CheckOutcome,
    Metric,
    PhaseSummary,
    bounded_text,
    check_outcomes,
    phase_summaries,
)
from evidence_app.consensus.rules import GRID_PHASES, declared_checks
from evidence_app.models import Evidence, EvidencePointer, PointerState, SignerKind, Verdict
from evidence_app.services.staleness import StaleReason, staleness_bulk
from evidence_app.verification.commands import (
    KEY_SIGNED_UPSTREAM_NOTE,
    TOOL_GUIDE,
    VerifyCommand,
    anchored_identity_regexp,
    commands_for,
)
from evidence_app.verification.signature import SignatureOutcome, SignerClaims
from evidence_app.verification.transcript import steps_from_transcript
from recipes_app.models import DIMENSIONS, Recipe


@dataclass(frozen=True)
class CommandLine:
    tool: str
    text: str
    note: str

    @property
    def guide(self) -> str:
        """What the tool is and how to get it."""
        return TOOL_GUIDE.get(self.tool, "")


def verify_commands(evidence: Evidence) -> list[CommandLine]:
    """The auditor commands ``commands_for`` built from the verified values at ingest; for
    rows stored without them, rebuilt the same way from the stored, verified signer (never
    from the bundle's own text)."""
    lines = [
        CommandLine(str(c.get("tool", "")), str(c.get("text", "")), str(c.get("note", "")))
        for c in evidence.verify_commands
        if c.get("text")
    ]
    if lines or evidence.verdict != Verdict.VERIFIED:
        return lines
    return [CommandLine(c.tool, c.text, c.note) for c in _rebuilt_commands(evidence)]


def pointer_paths(ids: Sequence[int]) -> dict[int, list[str]]:
    """The ingested pointer paths of each of ``ids`` (first 10 by path): one query for a page
    of records, where ``pointer_commands`` alone costs one per record."""
    out: dict[int, list[str]] = {pk: [] for pk in ids}
    for pk, path in (
        EvidencePointer.objects.filter(evidence_id__in=list(ids), state=PointerState.INGESTED)
        .order_by("evidence_id", "path")
        .values_list("evidence_id", "path")
    ):
        if len(out[pk]) < 10:
            out[pk].append(path)
    return out


def pointer_commands(evidence: Evidence, paths: Sequence[str] | None = None) -> list[CommandLine]:
    """``aicr evidence verify <pointer>`` for each AICR pointer this record was taken in
    through, pinned to the verified signer (never to what the pointer says); ``paths`` when
    the caller read them already (``pointer_paths``)."""
    signer = evidence.signer
    if evidence.verdict != Verdict.VERIFIED or signer.kind != SignerKind.KEYLESS:
        return []
    if paths is None:
        paths = list(
            evidence.pointers.filter(state=PointerState.INGESTED)
            .order_by("path")
            .values_list("path", flat=True)[:10]
        )
    return [
        CommandLine(
            "aicr (pointer)",
            shlex.join(
                [
                    "aicr",
                    "evidence",
                    "verify",
                    path,
                    "--expected-issuer",
                    signer.issuer,
                    "--expected-identity-regexp",
                    anchored_identity_regexp(signer.identity),
                ]
            ),
            "from a checkout of the AICR tree the pointer was imported from",
        )
        for path in paths
    ]


def _rebuilt_commands(evidence: Evidence) -> list[VerifyCommand]:
    signer = evidence.signer
    certificate = evidence.certificate
    mode: Literal["key", "keyless"] = "key" if signer.kind == SignerKind.KEY else "keyless"
    production = certificate.get("production_root")
    if not isinstance(production, bool):
        production = True
    claims = SignerClaims(
        mode=mode,
        identity=signer.identity or None,
        issuer=signer.issuer or None,
        production_root=production,
    )
    outcome = SignatureOutcome(
        status="ok",
        detail="",
        mode=mode,
        content="dsse",
        signer=claims,
        has_tlog_entry=evidence.rekor_log_index is not None or bool(certificate.get("tlog_kind")),
        rekor_v2=certificate.get("tlog_kind") == "rekor-v2",
    )
    try:
        return commands_for(outcome, predicate_type=evidence.predicate_type or None)
    except ValueError:
        return []


CLAIM_LABELS: tuple[tuple[str, str], ...] = (
    ("source_repository_uri", "Repository"),
    ("source_repository_ref", "Ref"),
    ("source_repository_digest", "Commit"),
    ("build_config_uri", "Workflow"),
    ("build_signer_uri", "Signer workflow"),
    ("build_trigger", "Trigger"),
    ("run_invocation_uri", "Run"),
    ("runner_environment", "Runner"),
    ("source_repository_visibility_at_signing", "Visibility"),
    ("github_workflow_repository", "Repository (legacy claim)"),
    ("github_workflow_ref", "Ref (legacy claim)"),
    ("github_workflow_sha", "Commit (legacy claim)"),
    ("github_workflow_name", "Workflow name (legacy claim)"),
    ("github_workflow_trigger", "Trigger (legacy claim)"),
)
_HTTP = re.compile(r"https://[^\s\"'<>]{1,2000}")


@dataclass(frozen=True)
class Claim:
    label: str
    value: str
    url: str = ""  # set only for an https URL, so the template links nothing else


def certificate_claims(evidence: Evidence) -> list[Claim]:
    """The verified certificate's claims worth showing (identity and issuer come first)."""
    signer = evidence.signer
    certificate = evidence.certificate
    nested = certificate.get("claims")
    claims = nested if isinstance(nested, Mapping) else certificate
    out: list[Claim] = []
    if signer.kind == SignerKind.KEY:
        fingerprint = signer.key.fingerprint if signer.key_id and signer.key else ""
        out.append(Claim("Key fingerprint (sha256)", fingerprint or "unknown"))
    else:
        out.append(Claim("Identity", signer.identity))
        out.append(Claim("Issuer", signer.issuer))
    seen = set()
    for key, label in CLAIM_LABELS:
        value = claims.get(key)
        if isinstance(value, str) and value and value not in seen:
            seen.add(value)
            url = value if _HTTP.fullmatch(value) else ""
            out.append(Claim(label, value[:4096], url))
    for key in ("certificate_sha256", "trusted_root"):
        value = certificate.get(key)
        if isinstance(value, str) and value:
            label = "Certificate sha256" if key == "certificate_sha256" else "Trusted root"
            out.append(Claim(label, value[:4096]))
    return out


@dataclass(frozen=True)
class DimensionCheck:
    dimension: str
    recipe_requires: str  # from the bound recipe: verified by the digest binding
    fingerprint_provides: str  # claimed by the statement
    statement_says: str  # claimed: matched | mismatched | unknown
    site_says: str  # this site's comparison of the two


def _compare(required: str, provided: str) -> str:
    if required in ("", "any"):
        return "matched"
    if provided == "":
        return "unknown"
    return "matched" if required.lower() == provided.lower() else "mismatched"


def fingerprint_vs_recipe(evidence: Evidence, recipe: Recipe | None) -> list[DimensionCheck]:
    predicate = evidence.predicate
    fingerprint = predicate.get("fingerprint")
    fingerprint = fingerprint if isinstance(fingerprint, Mapping) else {}
    match = predicate.get("criteriaMatch")
    per_dimension = match.get("perDimension") if isinstance(match, Mapping) else None
    claimed: dict[str, Mapping[str, Any]] = {}
    for item in per_dimension if isinstance(per_dimension, list) else ():
        if isinstance(item, Mapping) and isinstance(item.get("dimension"), str):
            claimed.setdefault(item["dimension"], item)
    out = []
    for dim in (*DIMENSIONS, "nodes"):
        item = claimed.get(dim, {})
        required = getattr(recipe, dim, "") if recipe is not None and dim != "nodes" else ""
        required = required or bounded_text(item.get("recipeRequires"), 4096)
        provided = bounded_text(item.get("fingerprintProvides"), 4096)
        if not provided:
            fp = fingerprint.get(dim)
            if isinstance(fp, Mapping) and fp.get("value") not in (None, ""):
                provided = str(fp.get("value"))[:4096]
        out.append(
            DimensionCheck(
                dimension=dim,
                recipe_requires=required,
                fingerprint_provides=provided,
                statement_says=bounded_text(item.get("match"), 32) or "—",
                site_says=_compare(required, provided) if dim != "nodes" else "—",
            )
        )
    return out


@dataclass(frozen=True)
class FingerprintItem:
    name: str
    value: str
    detail: str


def fingerprint_items(evidence: Evidence) -> list[FingerprintItem]:
    predicate = evidence.predicate
    fingerprint = predicate.get("fingerprint")
    if not isinstance(fingerprint, Mapping):
        return []
    out = []
    for name, item in list(fingerprint.items())[:64]:
        if not isinstance(name, str) or not isinstance(item, Mapping):
            continue
        value = item.get("value")
        details = [
            f"{k} {item[k]}" for k in ("version", "source") if isinstance(item.get(k), str | int)
        ]
        out.append(
            FingerprintItem(
                name=name[:200],
                value="" if value is None else str(value)[:4096],
                detail=" · ".join(details)[:4096],
            )
        )
    return out


# "<op> <number> [unit]": a bound a measured number is judged against. A bare value ("256", a
# model name) is a setting of the check, not a bound (AICR's recipes write every bound with its
# operator, e.g. ">= 450", "<= 2000").
_THRESHOLD = re.compile(r"^\s*(>=|<=|==|=|>|<)\s*([-+]?\d+(?:\.\d+)?)\s*([A-Za-z%/][\w%/.-]*)?\s*$")
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class ThresholdCheck:
    name: str
    requirement: str
    metric: Metric | None
    meets: bool | None  # None: no number to compare, or not a numeric threshold
    numeric: bool = False  # the requirement is "<op> <number>" (else a setting or version)


def threshold_bound(requirement: str) -> tuple[str, float] | None:
    """A declared threshold's operator and number; None for a setting (no operator)."""
    parsed = _THRESHOLD.match(requirement)
    return (parsed.group(1), float(parsed.group(2))) if parsed is not None else None


def _meets(op: str, value: float, bound: float) -> bool:
    return {
        ">=": value >= bound,
        ">": value > bound,
        "<=": value <= bound,
        "<": value < bound,
        "==": value == bound,
        "=": value == bound,
    }[op]


def _pick_metric(
    check: str, threshold: str, metrics: Sequence[Metric], only: bool
) -> Metric | None:
    """The number a run printed for ``threshold``: the check's only number when the threshold is
    named like the check, else the metric whose label holds every word of the threshold's name
    that is not the check's own (AICR's dynamo recipes name ``inference-perf``'s thresholds
    ``inference-throughput`` and ``inference-ttft-p99``; it prints ``Inference throughput`` and
    ``Inference TTFT p99``). A name matching no label gets no number: never another threshold's."""
    if threshold == check:
        return metrics[0] if len(metrics) == 1 or (metrics and only) else None
    key = threshold[len(check) + 1 :] if threshold.startswith(check + "-") else threshold
    wanted = set(_WORD.findall(key.lower())) - set(_WORD.findall(check.lower())) - {"inference"}
    if not wanted:
        return metrics[0] if len(metrics) == 1 and only else None
    for metric in metrics:
        if wanted <= set(_WORD.findall(metric.label.lower())):
            return metric
    return None


def threshold_checks(
    check: str, thresholds: Sequence[Mapping[str, Any]], metrics: Sequence[Metric]
) -> list[ThresholdCheck]:
    """Each declared threshold of a check against the number the run printed for it."""
    out = []
    for threshold in thresholds:
        name = bounded_text(threshold.get("name"), 200)
        requirement = str(threshold.get("value", ""))[:200]
        metric = _pick_metric(check, name, metrics, only=len(thresholds) == 1)
        bound = threshold_bound(requirement)
        meets = None
        if metric is not None and bound is not None:
            meets = _meets(bound[0], metric.value, bound[1])
        out.append(
            ThresholdCheck(
                name=name,
                requirement=requirement,
                metric=metric,
                meets=meets,
                numeric=bound is not None,
            )
        )
    return out


@dataclass(frozen=True)
class EvidenceCheck:
    outcome: CheckOutcome
    declared: bool
    thresholds: list[ThresholdCheck]


@dataclass(frozen=True)
class EvidencePhase:
    phase: str
    summary: PhaseSummary | None
    checks: list[EvidenceCheck]


def evidence_phases(evidence: Evidence, recipe: Recipe | None) -> list[EvidencePhase]:
    outcomes = check_outcomes(evidence.check_results)
    summaries = phase_summaries(evidence.predicate)
    declared = declared_checks(recipe.checks if recipe is not None else {})
    names = [p for p in GRID_PHASES if p in outcomes or p in summaries]
    names += sorted(p for p in {*outcomes, *summaries} if p not in GRID_PHASES)
    phases = []
    for phase in names:
        checks = [
            EvidenceCheck(
                outcome=outcome,
                declared=(phase, name) in declared,
                thresholds=threshold_checks(name, declared.get((phase, name), []), outcome.metrics),
            )
            for name, outcome in sorted(outcomes.get(phase, {}).items())
        ]
        phases.append(EvidencePhase(phase=phase[:64], summary=summaries.get(phase), checks=checks))
    return phases


@dataclass(frozen=True)
class FieldProvenance:
    field: str
    value: str
    how: str

    def as_dict(self) -> dict[str, str]:
        return {"field": self.field, "value": self.value, "how": self.how}


def verified_and_claimed(
    evidence: Evidence,
) -> tuple[list[FieldProvenance], list[FieldProvenance]]:
    """What this site checked itself (signature-covered and verified) and what the signer
    only asserts inside the signed statement: the one source of both lists, for the evidence
    page and the API. A value the verification did not establish (no Rekor entry, no signed
    timestamp) is never listed as verified."""
    passed = {str(step.get("step")): bool(step.get("ok")) for step in evidence.transcript}
    signer = evidence.signer
    verified = [FieldProvenance("Bundle sha256", evidence.sha256, "hash of the stored bytes")]
    if passed.get("signature"):
        if signer.kind == SignerKind.KEY:
            verified.append(
                FieldProvenance("Signing key", signer.label, "DSSE signature checked against it")
            )
        else:
            verified.append(
                FieldProvenance(
                    "Signer identity", signer.identity, "certificate verified to the trusted root"
                )
            )
            verified.append(FieldProvenance("OIDC issuer", signer.issuer, "certificate claim"))
        if evidence.rekor_log_index is not None:
            verified.append(
                FieldProvenance(
                    "Rekor log index", str(evidence.rekor_log_index), "inclusion proof checked"
                )
            )
        if evidence.integrated_time is not None:
            verified.append(
                FieldProvenance(
                    "Signed at",
                    evidence.integrated_time.strftime("%Y-%m-%d %H:%M:%S UTC"),
                    "Rekor integrated time / signed timestamp",
                )
            )
    if passed.get("statement"):
        verified.append(
            FieldProvenance("Predicate type", evidence.predicate_type, "signed statement")
        )
    if passed.get("bind"):
        verified.append(
            FieldProvenance(
                "Recipe",
                f"{evidence.recipe_name} @ {evidence.subject_digest}",
                "subject digest equals a known recipe digest",
            )
        )
    if passed.get("manifest"):
        verified.append(
            FieldProvenance(
                "Files and CTRF reports", "manifest.json", "every sha256 matches the signed digests"
            )
        )
    if passed.get("classify"):
        verified.append(
            FieldProvenance("Signer class", signer.get_signer_class_display(), "allowlist")
        )
    claimed = [
        FieldProvenance("Attested at", evidence.attested_at.strftime("%Y-%m-%d %H:%M UTC"), ""),
        FieldProvenance("AICR version", evidence.aicr_version or "—", ""),
        FieldProvenance("Validator catalog", evidence.validator_catalog_version or "—", ""),
        FieldProvenance("Kubernetes version", evidence.k8s_version or "—", ""),
        FieldProvenance("Fingerprint and criteria match", "see below", ""),
        FieldProvenance("Check results and performance numbers", "see below", ""),
    ]
    if evidence.is_simulated:
        claimed.append(FieldProvenance("Environment", "simulated cluster", "run by this site"))
    return verified, claimed


@dataclass
class EvidencePage:
    evidence: Evidence
    recipe: Recipe
    stale: list[StaleReason]
    claims: list[Claim]
    dimensions: list[DimensionCheck]
    fingerprint: list[FingerprintItem]
    phases: list[EvidencePhase]
    verified: list[FieldProvenance]
    claimed: list[FieldProvenance]
    commands: list[CommandLine]
    bundle_url: str

    @property
    def key_signed_note(self) -> str:
        """Why key-signed evidence counts here and would not upstream; "" for keyless."""
        return KEY_SIGNED_UPSTREAM_NOTE if self.evidence.signer.kind == SignerKind.KEY else ""

    @property
    def has_ctrf(self) -> bool:
        """Per-check CTRF results exist (a phase without any then simply had none)."""
        return any(phase.checks for phase in self.phases)

    @property
    def transcript(self) -> list[dict[str, Any]]:
        """The transcript as ``aicr evidence verify``'s step table (``verify_evidence`` prints
        the same rows): numbered steps, then the phases the predicate records."""
        phases = {
            name: {"passed": s.passed, "failed": s.failed, "skipped": s.skipped}
            for name, s in phase_summaries(self.evidence.predicate).items()
        }
        return [
            {
                "number": row["step"],
                "step": row["name"],
                "ok": row["status"] == "passed",
                "detail": str(row.get("detail", "")),
                "sub_rows": row.get("subRows", []),
            }
            for row in steps_from_transcript(self.evidence.transcript, phases=phases)
        ]


def bundle_url(evidence: Evidence) -> str:
    """The exact stored bytes (``/api/v1/evidence/<id>/bundle``)."""
    return reverse("api:evidence-bundle", args=[evidence.pk])


def evidence_page(*, evidence: Evidence) -> EvidencePage:
    stale = staleness_bulk([evidence]).get(evidence.pk, [])
    verified, claimed = verified_and_claimed(evidence)
    return EvidencePage(
        evidence=evidence,
        recipe=evidence.recipe,
        stale=stale,
        claims=certificate_claims(evidence),
        dimensions=fingerprint_vs_recipe(evidence, evidence.recipe),
        fingerprint=fingerprint_items(evidence),
        phases=evidence_phases(evidence, evidence.recipe),
        verified=verified,
        claimed=claimed,
        commands=pointer_commands(evidence) + verify_commands(evidence),
        bundle_url=bundle_url(evidence),
    )
