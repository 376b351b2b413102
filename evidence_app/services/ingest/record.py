"""What a verified upload stores beside its bytes: certificate, check results, verify commands."""

from __future__ import annotations

import logging
from typing import Any

from evidence_app.models import Container, Verdict
from evidence_app.services.ingest.upload_log import Upload, is_user
from evidence_app.services.signers import SignerDecision
from evidence_app.services.versions import version_key
from evidence_app.verification import AicrStatement, SignatureOutcome, SummaryBundle, commands_for
from evidence_app.verification.pipeline import VerificationReport
from recipes_app.models import Recipe

logger = logging.getLogger(__name__)

BUNDLE_FILE = "evidence.sigstore.json"


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def certificate_of(decision: SignerDecision, outcome: SignatureOutcome) -> dict[str, Any]:
    claims = outcome.signer
    assert claims is not None
    if claims.mode == "key":
        assert decision.key is not None
        return {
            "mode": "key",
            "key_id": decision.key.pk,
            "key_name": decision.key.name,
            "key_fingerprint": claims.key_fingerprint,
            "algorithm": decision.key.algorithm,
            "is_demo_key": decision.key.is_demo,
        }
    return {
        "mode": "keyless",
        "identity": claims.identity,
        "issuer": claims.issuer,
        "claims": dict(claims.claims),
        "certificate_sha256": claims.certificate_sha256,
        "not_before": _iso(claims.certificate_not_before),
        "not_after": _iso(claims.certificate_not_after),
        "trusted_root": claims.trusted_root,
        "production_root": claims.production_root,
        "tlog_kind": claims.tlog_kind,
        "rekor_log_index": claims.rekor_log_index,
        "rekor_log_id": claims.rekor_log_id,
        "integrated_time": _iso(claims.integrated_time),
        "timestamp_authority_time": _iso(claims.timestamp_authority_time),
    }


def _thresholds(checks: Any) -> dict[tuple[str, str], list[Any]]:
    found: dict[tuple[str, str], list[Any]] = {}
    checks = checks if isinstance(checks, dict) else {}
    for phase, items in checks.items():
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict) and item.get("name"):
                found[(phase, str(item["name"]))] = list(item.get("thresholds") or [])
    return found


def check_results_from(summary: SummaryBundle | None, recipe: Recipe) -> dict[str, Any]:
    """``{phase: {check: {status, raw_status, duration_ms, message, metrics, thresholds}}}``
    from the bundle's CTRF reports (a failing duplicate wins over a passing one); the
    recipe's declared checks (thresholds) are read only when there are reports."""
    if summary is None:
        return {}
    thresholds = _thresholds(Recipe.objects.values_list("checks", flat=True).get(pk=recipe.pk))
    results: dict[str, Any] = {}
    for phase, report in sorted(summary.ctrf.items()):
        checks: dict[str, Any] = {}
        for test in report.tests:
            previous = checks.get(test.name)
            if previous is not None and previous["status"] == "failed":
                continue
            checks[test.name] = {
                "status": test.status,
                "raw_status": test.raw_status,
                "duration_ms": test.duration_ms,
                "message": test.message,
                "metrics": [
                    {"label": m.label, "value": m.value, "unit": m.unit} for m in test.metrics
                ],
                "thresholds": thresholds.get((phase, test.name), []),
            }
        results[phase] = checks
    return results


def _fingerprint_value(statement: AicrStatement, name: str) -> str:
    value = statement.fingerprint.get(name)
    if value is None or value.value is None:
        return ""
    return str(value.value)[:100]


def verify_commands(
    outcome: SignatureOutcome, statement: AicrStatement, *, tarball: bool, oci_ref: str
) -> list[dict[str, str]]:
    if tarball:
        bundle_file = "summary-bundle/attestation.intoto.jsonl"
        artifact_file = "summary-bundle/recipe.yaml"
        aicr_input: str | None = "./summary-bundle"
    else:
        bundle_file, artifact_file, aicr_input = BUNDLE_FILE, "recipe.yaml", None
    try:
        commands = commands_for(
            outcome,
            predicate_type=statement.predicate_type,
            bundle_file=bundle_file,
            artifact_file=artifact_file,
            aicr_input=oci_ref or aicr_input,
        )
    except ValueError:
        logger.warning("no verify commands for bundle %s", outcome.bundle_sha256, exc_info=True)
        return []
    return [{"tool": c.tool, "text": c.text, "note": c.note} for c in commands]


def evidence_fields(
    report: VerificationReport,
    *,
    decision: SignerDecision,
    recipe: Recipe,
    data: bytes,
    artifact: bytes | None,
    upload: Upload,
    is_demo: bool,
    is_simulated: bool,
) -> dict[str, Any]:
    """Every column of the ``Evidence`` row a verified, bound upload stores."""
    statement, outcome = report.statement, report.outcome
    assert statement is not None
    assert outcome is not None
    assert outcome.signer is not None
    tarball = report.kind == "tarball"
    return {
        "sha256": upload.sha256,
        "payload_sha256": statement.statement_sha256,
        "content": data,
        "size": len(data),
        "container": Container.OCI
        if upload.oci_ref
        else (Container.SUMMARY_BUNDLE if tarball else Container.BUNDLE),
        "media_type": report.media_type[:100],
        "artifact": artifact,
        "oci_ref": upload.oci_ref[:500],
        "verdict": Verdict.VERIFIED,
        "transcript": report.transcript.to_list(),
        "recipe": recipe,
        "recipe_name": statement.recipe_name,
        "subject_digest": statement.recipe_digest,
        "predicate_type": statement.predicate_type,
        "aicr_version": statement.aicr_version[:100],
        "aicr_version_key": version_key(statement.aicr_version),
        "validator_catalog_version": statement.validator_catalog_version[:100],
        "validator_catalog_version_key": version_key(
            statement.validator_catalog_version, assume_v=True
        ),
        "k8s_version": _fingerprint_value(statement, "k8sVersion"),
        "attested_at": statement.attested_at,
        "predicate": dict(statement.predicate),
        "check_results": check_results_from(report.summary, recipe),
        "certificate": certificate_of(decision, outcome),
        "rekor_log_index": outcome.signer.rekor_log_index,
        "integrated_time": outcome.signer.signed_at,
        "trusted_root_name": (outcome.signer.trusted_root or "")[:100],
        "verify_commands": verify_commands(
            outcome, statement, tarball=tarball, oci_ref=upload.oci_ref
        ),
        "is_demo": is_demo or bool(decision.key is not None and decision.key.is_demo),
        "is_simulated": is_simulated,
        "uploaded_by": upload.user if is_user(upload.user) else None,
    }
