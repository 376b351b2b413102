"""Verify-before-count ingest: uploaded bytes → a verified, bound, classified Evidence record.

Steps, each a transcript line ``{step, ok, detail}``, stopping at the first failure:

``parse``      the bytes are a Sigstore bundle (v0.1-v0.3, or a bare DSSE envelope), or an AICR
               evidence directory as tar / tar.gz carrying ``attestation.intoto.jsonl``;
``signature``  keyless against the enabled ``TrustRoot`` rows (issuer policy: see
               ``services.signers``), or key-signed against the active ``SigningKey`` rows;
``statement``  the in-toto statement is AICR recipe evidence;
``manifest``   (tarballs) every file matches ``manifest.json`` and the predicate's digests;
``bind``       the subject digest is some catalog version's recipe digest (the current catalog
               preferred; an older catalog's recipe binds to that row and is stale);
``classify``   the signer's class and weight from the allowlist in force / registered keys.

Verdicts: ``verified``; ``invalid`` (malformed, bad signature, tampered files);
``unsupported`` (a format the verifiers cannot check); ``rejected`` (not acceptable evidence:
not AICR recipe evidence, unknown recipe, unsigned, too large). Only a verified upload writes
rows (Signer, SignerClassChange, Evidence); every upload writes one ``UploadLog``.

Identity: one Evidence per signed statement and signer — ``(signer, payload_sha256)``, the
sha256 of the verified DSSE payload (the in-toto statement bytes) and the verified signer
(``Signer.source_id``: sha256 of the certificate's issuer and identity, or of the registered
key's fingerprint), a unique constraint. Whatever wrapper carries the statement (bundle JSON
formatting, tarball compression or tar layout, with or without the artifact, an OCI copy, a new
certificate for the same identity), an upload of a known statement answers 200 with the
existing record — a withdrawn one included, which stays withdrawn and says so — also when two
uploads race. The uploaded bytes' sha256 stays unique too: the same bytes are the same record.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, OperationalError, connection, transaction
from django.db.models import Count, Field, Max, Model
from django.utils import timezone

from evidence_app.consensus.stored import evidence_stored as refresh_consensus
from evidence_app.models import (
    AcceptedIssuer,
    Allowlist,
    Container,
    Evidence,
    Signer,
    SigningKey,
    TrustRoot,
    UploadLog,
    UploadState,
    Verdict,
)
from evidence_app.services import signers, trust_roots
from evidence_app.services.signers import SignerDecision
from evidence_app.services.versions import version_key
from evidence_app.verification import (
    AicrStatement,
    SignatureOutcome,
    SummaryBundle,
    commands_for,
)
from evidence_app.verification._json import storable, unstorable_text
from evidence_app.verification.pipeline import VerificationReport, verify_evidence
from evidence_app.verification.signature import EXTRA_POLICY_NAMES
from evidence_app.verification.trust import TrustRoot as LoadedRoot
from recipes_app.models import Catalog, Recipe

logger = logging.getLogger(__name__)

DEFAULT_MAX_UPLOAD_BYTES = 10 * 1024 * 1024
STATUS_CREATED = 201
STATUS_EXISTING = 200
STATUS_REFUSED = 422
STATUS_TOO_LARGE = 413
STATUS_UNAVAILABLE = 503
# How long a client should wait before retrying an upload the database could not take.
RETRY_AFTER_SECONDS = 5
# Writing the upload log of such an upload: tries, and the pause before each retry.
LOG_WRITE_PAUSES = (0.0, 0.25, 1.0)
BUNDLE_FILE = "evidence.sigstore.json"
MAX_REASON = 1000


def max_upload_bytes() -> int:
    return int(getattr(settings, "EVIDENCE_MAX_UPLOAD_BYTES", DEFAULT_MAX_UPLOAD_BYTES))


@dataclass
class IngestResult:
    """What happened to one upload (also the API's response body, less ``evidence``)."""

    evidence: Evidence | None
    created: bool
    verdict: str
    failed_step: str
    signer: dict[str, Any]
    transcript: list[dict[str, Any]]
    reason: str
    http_status: int
    upload: UploadLog | None = None
    retry_after: int | None = None  # seconds: the database could not take it now; retry

    @property
    def ok(self) -> bool:
        return self.verdict == Verdict.VERIFIED

    @property
    def unavailable(self) -> bool:
        """Nothing was decided: a database write failed (e.g. SQLite busy); retry later."""
        return self.retry_after is not None


@dataclass(frozen=True)
class VerificationPolicy:
    """What a signature must satisfy, read from the database and settings once per upload."""

    trusted_roots: list[LoadedRoot]
    issuers: list[str]
    identity_regex: str | None = None
    extra_policies: Mapping[str, str] = field(default_factory=dict)
    public_keys: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PolicySnapshot:
    """What the database says about verification, as of one version (see ``policy_snapshot``).

    Shared between threads and uploads: read only.
    """

    version: tuple[Any, ...] | None
    trusted_roots: list[LoadedRoot]
    root_issuers: list[str]  # enabled roots' issuers, then the maintainers' accepted issuers
    public_keys: Mapping[str, str]
    keys: Mapping[int, SigningKey]
    allowlist_row: Allowlist | None
    allowlist: Any  # corroborate.allowlist.Allowlist | None


_snapshot_cache: dict[tuple[Any, ...], PolicySnapshot] = {}
_snapshot_lock = threading.Lock()
_index_cache: dict[tuple[Any, ...], CatalogIndex] = {}


@functools.cache
def _version_sql_for(vendor: str) -> str:
    """One statement: a digest of everything the policy is built from (PostgreSQL).

    Enabled trust roots (name, production flag, JSON and issuers), active keys (every column
    the verifier or the classification reads), the allowlist in force (pk and body), the
    accepted issuers, and the catalog versions (for ``_bind``'s cache): any add, edit,
    enable/disable, revoke, publish or import changes it, so it is picked up on the very next
    upload, in this process or any other.
    """

    def col(model: Any, name: str) -> str:
        return connection.ops.quote_name(model._meta.get_field(name).column)

    def table(model: Any) -> str:
        return connection.ops.quote_name(model._meta.db_table)

    r, k, a, i, c = TrustRoot, SigningKey, Allowlist, AcceptedIssuer, Catalog
    roots = ", ".join(
        [
            f"{col(r, 'id')}",
            f"{col(r, 'name')}",
            f"{col(r, 'is_production')}",
            f"md5({col(r, 'trusted_root_json')})",
            f"md5({col(r, 'accepted_issuers')})",
        ]
    )
    active_keys = ", ".join(
        [
            f"{col(k, 'id')}",
            f"{col(k, 'name')}",
            f"{col(k, 'fingerprint')}",
            f"{col(k, 'algorithm')}",
            f"{col(k, 'is_demo')}",
            f"md5({col(k, 'public_key_pem')})",
        ]
    )
    # Identifiers only, quoted, from the models' metadata; no value is interpolated.
    return (
        "SELECT "  # noqa: S608
        f"(SELECT md5(coalesce(string_agg(concat_ws(':', {roots}), ',' "
        f"ORDER BY {col(r, 'id')}), '')) FROM {table(r)} WHERE {col(r, 'enabled')}), "
        f"(SELECT md5(coalesce(string_agg(concat_ws(':', {active_keys}), ',' "
        f"ORDER BY {col(k, 'id')}), '')) FROM {table(k)} "
        f"WHERE {col(k, 'revoked_at')} IS NULL), "
        f"(SELECT concat_ws(':', {col(a, 'id')}, md5({col(a, 'body')})) FROM {table(a)} "
        f"ORDER BY {col(a, 'created_at')} DESC, {col(a, 'id')} DESC LIMIT 1), "
        f"(SELECT md5(coalesce(string_agg({col(i, 'issuer')}, ',' ORDER BY {col(i, 'issuer')}), "
        f"'')) FROM {table(i)}), "
        # Catalog versions are imported whole and never edited: their count and newest id
        # change with any import or removal (the bind cache's key).
        f"(SELECT concat_ws(':', count(*), max({col(c, 'id')})) FROM {table(c)})"
    )


def _policy_version() -> tuple[Any, ...] | None:
    if connection.vendor != "postgresql":
        return None  # no cache: every upload reads the policy afresh
    with connection.cursor() as cursor:
        cursor.execute(_version_sql_for(connection.vendor))
        row = cursor.fetchone()
    return (connection.alias, connection.settings_dict.get("NAME"), *row)


def _policy_load(version: tuple[Any, ...] | None) -> PolicySnapshot:
    allowlist_row, allowlist = signers.allowlist_in_force()
    roots = list(TrustRoot.objects.enabled().only("name", "trusted_root_json", "accepted_issuers"))
    active = {key.pk: key for key in SigningKey.objects.active().order_by("pk")}
    return PolicySnapshot(
        version=version,
        trusted_roots=trust_roots.roots_load(roots),
        root_issuers=trust_roots.issuers_of(row.accepted_issuers for row in roots)
        + signers.maintainer_issuers(),
        public_keys={str(pk): key.public_key_pem for pk, key in active.items()},
        keys=active,
        allowlist_row=allowlist_row,
        allowlist=allowlist,
    )


def policy_snapshot() -> PolicySnapshot:
    """Trust roots (loaded), their issuers, the active keys and the allowlist in force (parsed).

    Cached in process under the version ``_version_sql_for`` reads: one query per upload while
    nothing changed. A snapshot read while a maintainer's change lands is used for that upload
    but not cached unless the version is the same after reading it.
    """
    version = _policy_version()
    if version is not None:
        with _snapshot_lock:
            cached = _snapshot_cache.get(version)
        if cached is not None:
            return cached
    snapshot = _policy_load(version)
    if version is not None and _policy_version() == version:
        with _snapshot_lock:
            _snapshot_cache.clear()
            _snapshot_cache[version] = snapshot
    return snapshot


def policy_cache_clear() -> None:
    with _snapshot_lock:
        _snapshot_cache.clear()
        _index_cache.clear()


def policy_current(
    allowlist: Any = None, *, snapshot: PolicySnapshot | None = None
) -> VerificationPolicy:
    """The verification policy: the snapshot (read now when not given) under the settings."""
    regex = getattr(settings, "EVIDENCE_IDENTITY_REGEX", None) or None
    if regex is not None:
        try:
            re.compile(regex)
        except re.error as exc:
            raise ImproperlyConfigured(f"EVIDENCE_IDENTITY_REGEX is not a regex: {exc}") from None
    extra = dict(getattr(settings, "EVIDENCE_EXTRA_POLICIES", None) or {})
    unknown = sorted(set(extra) - EXTRA_POLICY_NAMES)
    if unknown:
        raise ImproperlyConfigured(f"EVIDENCE_EXTRA_POLICIES: unknown policies {unknown}")
    if snapshot is None:
        snapshot = policy_snapshot()
    if allowlist is None:
        allowlist = snapshot.allowlist
    return VerificationPolicy(
        trusted_roots=snapshot.trusted_roots,
        issuers=signers.issuers_from(allowlist, snapshot.root_issuers),
        identity_regex=regex,
        extra_policies=extra,
        public_keys=snapshot.public_keys,
    )


# --- the verification half -------------------------------------------------------------------


def _verify(
    data: bytes, *, artifact: bytes | None, policy: VerificationPolicy
) -> VerificationReport:
    """``verification.pipeline.verify_evidence`` under the site's policy."""
    return verify_evidence(
        data,
        trusted_root=policy.trusted_roots,
        issuer=policy.issuers,
        identity_regex=policy.identity_regex,
        extra_policies=policy.extra_policies or None,
        public_keys=policy.public_keys,
        artifact=artifact,
        # A good signature from an issuer the site does not accept is reported, not refused.
        report_unlisted_issuers=True,
    )


def _verdict_of_failure(report: VerificationReport) -> str:
    failed = report.transcript.failed_step
    assert failed is not None
    if failed.step == "parse":
        if report.unsigned:
            return Verdict.REJECTED
        outcome = report.outcome
        return (
            Verdict.UNSUPPORTED
            if outcome is not None and outcome.status == "unsupported"
            else Verdict.INVALID
        )
    if failed.step == "signature":
        outcome = report.outcome
        return (
            Verdict.UNSUPPORTED
            if outcome is not None and outcome.status == "unsupported"
            else Verdict.INVALID
        )
    if failed.step == "manifest":
        return Verdict.INVALID
    return Verdict.REJECTED  # statement, bind


# --- bind --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CatalogIndex:
    """What bind reads: every catalog version's recipes by digest (newest catalog first) and
    the current catalog's by name; ids, names and digests only. Shared, read only."""

    current_pk: int | None
    by_digest: Mapping[str, tuple[Recipe, ...]]
    current_by_name: Mapping[str, Recipe]


def _catalog_version(policy_version: tuple[Any, ...] | None) -> tuple[Any, ...]:
    """Catalog versions are imported whole and never edited: their count and newest id change
    with any import or removal. PostgreSQL reads them in the policy version's statement."""
    if policy_version is not None:
        return (policy_version[0], policy_version[1], policy_version[-1])
    found = Catalog.objects.aggregate(n=Count("pk"), newest=Max("pk"))
    return (connection.alias, connection.settings_dict.get("NAME"), found["n"], found["newest"])


def catalog_index(policy_version: tuple[Any, ...] | None) -> CatalogIndex:
    """The ``CatalogIndex``, cached in process per catalog version (one query when it changed;
    none on PostgreSQL while it did not, one aggregate on SQLite). Built while an import
    commits, it may hold the newer catalog under the older version: newer, never missing."""
    key = _catalog_version(policy_version)
    with _snapshot_lock:
        cached = _index_cache.get(key)
    if cached is not None:
        return cached
    current_pk = Catalog.objects.newest_first().values_list("pk", flat=True).first()
    by_digest: dict[str, list[Recipe]] = {}
    current_by_name: dict[str, Recipe] = {}
    recipes = Recipe.objects.only("pk", "name", "digest", "catalog_id").order_by(
        "-catalog__imported_at", "-catalog__pk", "pk"
    )
    for recipe in recipes:
        by_digest.setdefault(recipe.digest, []).append(recipe)
        if recipe.catalog_id == current_pk:
            current_by_name.setdefault(recipe.name, recipe)
    index = CatalogIndex(
        current_pk=current_pk,
        by_digest={digest: tuple(rows) for digest, rows in by_digest.items()},
        current_by_name=current_by_name,
    )
    with _snapshot_lock:
        _index_cache.clear()
        _index_cache[key] = index
    return index


def _bind(statement: AicrStatement, index: CatalogIndex) -> tuple[Recipe | None, str]:
    """The recipe row the statement names (current catalog first), or None and the reason."""
    digest = statement.recipe_digest
    candidates = index.by_digest.get(digest, ())
    named = [r for r in candidates if r.name == statement.recipe_name]
    if not named:
        if candidates:
            return None, (
                f"subject digest sha256:{digest[:12]}… is the digest of recipe "
                f"{candidates[0].name!r}, not of {statement.recipe_name!r}"
            )
        current = index.current_by_name.get(statement.recipe_name)
        hint = (
            f"; the current catalog's {statement.recipe_name} has digest sha256:"
            f"{current.digest[:12]}…"
            if current is not None
            else f"; no catalog version has a recipe named {statement.recipe_name!r}"
        )
        return None, (
            f"unknown recipe: no catalog version has recipe {statement.recipe_name!r} with "
            f"digest sha256:{digest[:12]}…{hint}"
        )
    in_current = [r for r in named if r.catalog_id == index.current_pk]
    recipe = in_current[0] if in_current else named[0]
    if in_current:
        return recipe, (
            f"recipe {recipe.name} (sha256:{digest[:12]}…) of the current catalog "
            f"#{recipe.catalog_id}"
        )
    now = index.current_by_name.get(recipe.name)
    why = (
        f"the current catalog's digest is sha256:{now.digest[:12]}…"
        if now is not None
        else "the recipe is not in the current catalog"
    )
    return recipe, (
        f"recipe {recipe.name} (sha256:{digest[:12]}…) of an older catalog #{recipe.catalog_id}; "
        f"{why}: stale (recipe changed)"
    )


# --- what is stored --------------------------------------------------------------------------


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def _certificate(decision: SignerDecision, outcome: SignatureOutcome) -> dict[str, Any]:
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


def _commands(
    outcome: SignatureOutcome, statement: AicrStatement, *, tarball: bool, oci_ref: str
) -> list[dict[str, str]]:
    if tarball:
        files = {
            "bundle_file": "summary-bundle/attestation.intoto.jsonl",
            "artifact_file": "summary-bundle/recipe.yaml",
            "aicr_input": "./summary-bundle",
        }
    else:
        files = {"bundle_file": BUNDLE_FILE, "artifact_file": "recipe.yaml", "aicr_input": None}
    if oci_ref:
        files["aicr_input"] = oci_ref
    try:
        commands = commands_for(outcome, predicate_type=statement.predicate_type, **files)
    except ValueError:
        logger.warning("no verify commands for bundle %s", outcome.bundle_sha256, exc_info=True)
        return []
    return [{"tool": c.tool, "text": c.text, "note": c.note} for c in commands]


# --- the service -----------------------------------------------------------------------------


def _log(
    *,
    upload: UploadLog | None,
    user: Any,
    channel: str,
    sha256: str,
    size: int,
    filename: str,
    oci_ref: str,
    result: IngestResult,
) -> UploadLog:
    log = upload or UploadLog(user=user if _is_user(user) else None, channel=channel)
    log.state = UploadState.DONE
    # What a refused upload carried may be text no column can hold (a NUL, a lone surrogate,
    # echoed in a reason or a signer's identity): the log keeps it escaped.
    log.oci_ref = storable(oci_ref) or log.oci_ref
    log.sha256 = sha256
    log.size = size
    log.filename = storable(filename)[:255]
    log.verdict = result.verdict
    log.failed_step = result.failed_step
    log.reason = storable(result.reason)[:MAX_REASON]
    log.transcript = storable(result.transcript)
    log.signer = storable(result.signer)
    log.created = result.created if result.ok else None
    log.http_status = result.http_status
    log.completed_at = timezone.now()
    log.evidence = result.evidence
    if log._state.adding:
        _insert(log)
    else:  # an OCI upload's pending row, completed by the worker
        log.save()
    result.upload = log
    return log


def _is_user(user: Any) -> bool:
    return user is not None and getattr(user, "is_authenticated", False) and user.pk is not None


def _failure(
    transcript: list[dict[str, Any]],
    *,
    verdict: str,
    step: str,
    reason: str,
    http_status: int = STATUS_REFUSED,
    signer: dict[str, Any] | None = None,
) -> IngestResult:
    return IngestResult(
        evidence=None,
        created=False,
        verdict=verdict,
        failed_step=step,
        signer=signer or {},
        transcript=transcript,
        reason=reason,
        http_status=http_status,
    )


def evidence_ingest(
    *,
    data: bytes,
    artifact: bytes | None,
    filename: str,
    user: Any,
    channel: str,
    oci_ref: str = "",
    upload: UploadLog | None = None,
    is_simulated: bool = False,
    is_demo: bool = False,
) -> IngestResult:
    """Verify, bind, classify and store one upload; see the module docstring.

    ``upload``: an existing (OCI) ``UploadLog`` row to complete instead of writing a new one.
    ``is_simulated``: evidence from a simulated cluster (labelled, never counted).
    ``is_demo``: demo data; evidence signed by a demo key is demo data anyway.

    A database error that survives the driver's own waiting (SQLite "database is locked" after
    the busy timeout, a PostgreSQL lock timeout or lost connection) is no verdict: the result
    is ``unavailable`` with ``retry_after``, nothing is stored, and the upload log records it.
    """
    data = bytes(data)
    try:
        return _ingest(
            data=data,
            artifact=artifact,
            filename=filename,
            user=user,
            channel=channel,
            oci_ref=oci_ref,
            upload=upload,
            is_simulated=is_simulated,
            is_demo=is_demo,
        )
    except OperationalError as exc:
        if connection.in_atomic_block:
            raise  # the caller's transaction is broken: only the caller can recover
        return _unavailable(
            exc,
            upload=upload,
            user=user,
            channel=channel,
            sha256=hashlib.sha256(data).hexdigest(),
            size=len(data),
            filename=filename or "",
            oci_ref=oci_ref,
        )


def _ingest(
    *,
    data: bytes,
    artifact: bytes | None,
    filename: str,
    user: Any,
    channel: str,
    oci_ref: str,
    upload: UploadLog | None,
    is_simulated: bool,
    is_demo: bool,
) -> IngestResult:
    sha256 = hashlib.sha256(data).hexdigest()
    common = {
        "upload": upload,
        "user": user,
        "channel": channel,
        "sha256": sha256,
        "size": len(data),
        "filename": filename or "",
        "oci_ref": oci_ref,
    }
    unstorable_name = unstorable_text(filename or "", what="filename")
    if unstorable_name is not None:
        result = _failure(
            [{"step": "parse", "ok": False, "detail": unstorable_name}],
            verdict=Verdict.REJECTED,
            step="parse",
            reason=unstorable_name,
        )
        _log(result=result, **common)
        return result
    limit = max_upload_bytes()
    for what, blob in (("upload", data), ("artifact", artifact)):
        if blob is not None and len(blob) > limit:
            reason = f"{what} of {len(blob)} bytes exceeds the limit of {limit} bytes"
            result = _failure(
                [{"step": "parse", "ok": False, "detail": reason}],
                verdict=Verdict.REJECTED,
                step="parse",
                reason=reason,
                http_status=STATUS_TOO_LARGE,
            )
            _log(result=result, **common)
            return result

    snapshot = policy_snapshot()
    allowlist_row, allowlist = snapshot.allowlist_row, snapshot.allowlist
    policy = policy_current(allowlist, snapshot=snapshot)
    report = _verify(data, artifact=artifact, policy=policy)
    transcript = report.transcript
    outcome = report.outcome
    # Who signed, once the signature verified (shown even when a later step refuses).
    decision = (
        signers.classify(outcome.signer, allowlist=allowlist, keys=snapshot.keys)
        if outcome is not None and outcome.ok and outcome.signer is not None
        else None
    )
    signer_summary = decision.summary() if decision is not None else {}
    if not transcript.ok or report.statement is None:
        failed = transcript.failed_step
        result = _failure(
            transcript.to_list(),
            verdict=_verdict_of_failure(report),
            step=failed.step if failed else "parse",
            reason=failed.detail if failed else "not verified",
            signer=signer_summary,
        )
        _log(result=result, **common)
        return result

    statement = report.statement
    assert outcome is not None
    assert outcome.signer is not None
    assert decision is not None
    # The statement and CTRF reports were checked as they were parsed; the certificate's claims
    # (a private CA may write anything into them) are checked here, before any row is written.
    unstorable_signer = unstorable_text(decision.summary(), what="signer") or unstorable_text(
        dict(outcome.signer.claims), what="signer certificate claims"
    )
    if unstorable_signer is not None:
        transcript.fail("classify", unstorable_signer)
        result = _failure(
            transcript.to_list(),
            verdict=Verdict.REJECTED,
            step="classify",
            reason=unstorable_signer,
            signer=signer_summary,
        )
        _log(result=result, **common)
        return result
    recipe, bind_detail = _bind(statement, catalog_index(snapshot.version))
    if recipe is None:
        transcript.fail("bind", bind_detail)
        result = _failure(
            transcript.to_list(),
            verdict=Verdict.REJECTED,
            step="bind",
            reason=bind_detail,
            signer=signer_summary,
        )
        _log(result=result, **common)
        return result
    transcript.ok_step("bind", bind_detail)
    transcript.ok_step("classify", decision.detail)

    evidence_fields = {
        "sha256": sha256,
        "payload_sha256": statement.statement_sha256,
        "content": data,
        "size": len(data),
        "container": Container.OCI
        if oci_ref
        else (Container.SUMMARY_BUNDLE if report.kind == "tarball" else Container.BUNDLE),
        "media_type": report.media_type[:100],
        "artifact": artifact,
        "oci_ref": oci_ref[:500],
        "verdict": Verdict.VERIFIED,
        "transcript": transcript.to_list(),
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
        "certificate": _certificate(decision, outcome),
        "rekor_log_index": outcome.signer.rekor_log_index,
        "integrated_time": outcome.signer.signed_at,
        "trusted_root_name": (outcome.signer.trusted_root or "")[:100],
        "verify_commands": _commands(
            outcome, statement, tarball=report.kind == "tarball", oci_ref=oci_ref
        ),
        "is_demo": is_demo or bool(decision.key is not None and decision.key.is_demo),
        "is_simulated": is_simulated,
        "uploaded_by": user if _is_user(user) else None,
    }
    return _store(evidence_fields, decision=decision, allowlist_row=allowlist_row, common=common)


def _existing(
    fields: dict[str, Any], decision: SignerDecision
) -> tuple[Signer | None, Evidence | None]:
    """The signer's row and its record of this statement (the lookup before storing)."""
    return _known(fields, decision)


def _known(
    fields: dict[str, Any], decision: SignerDecision
) -> tuple[Signer | None, Evidence | None]:
    """One indexed statement: the signer (unique ``source_id``) with the pk of its record of
    this payload (the unique ``(signer, payload_sha256)``). The same bytes are the same
    statement by the same signer, so this finds a byte-identical re-upload too. The record
    itself is read only when there is one (a re-upload)."""
    with connection.cursor() as cursor:
        cursor.execute(_known_sql(), [fields["payload_sha256"], decision.source_id])
        row = cursor.fetchone()
    if row is None:
        return None, None
    *values, known_pk = row
    names = [f.attname for f in Signer._meta.concrete_fields]
    signer = Signer.from_db(connection.alias, names, values)
    if known_pk is None:
        return signer, None
    evidence = Evidence.objects.defer("content", "artifact").get(pk=known_pk)
    evidence.signer = signer
    return signer, evidence


@functools.cache
def _known_sql_for(vendor: str) -> str:
    def col(model: Any, name: str) -> str:
        return connection.ops.quote_name(model._meta.get_field(name).column)

    def table(model: Any) -> str:
        return connection.ops.quote_name(model._meta.db_table)

    s, e = Signer, Evidence
    columns = ", ".join(
        f"{table(s)}.{connection.ops.quote_name(f.column)}" for f in s._meta.concrete_fields
    )
    # Identifiers only, quoted, from the models' metadata; the values are parameters. Written
    # out once because the ORM's compilation of this (a correlated subquery) costs more CPU
    # than the database takes to answer it (docs/benchmarks.md).
    return (
        f"SELECT {columns}, (SELECT {table(e)}.{col(e, 'id')} FROM {table(e)} "  # noqa: S608
        f"WHERE {table(e)}.{col(e, 'signer')} = {table(s)}.{col(s, 'id')} "
        f"AND {table(e)}.{col(e, 'payload_sha256')} = %s LIMIT 1) "
        f"FROM {table(s)} WHERE {table(s)}.{col(s, 'source_id')} = %s"
    )


def _known_sql() -> str:
    return _known_sql_for(connection.vendor)


@functools.cache
def _insert_sql_for(model: type[Model], vendor: str) -> tuple[str, tuple[Field[Any, Any], ...]]:
    """The INSERT of every column but the primary key, and the fields in its order."""
    qn = connection.ops.quote_name
    fields = tuple(f for f in model._meta.concrete_fields if not f.primary_key)
    placeholders = ", ".join(["%s"] * len(fields))
    sql = (
        f"INSERT INTO {qn(model._meta.db_table)} "  # noqa: S608 - identifiers from the model
        f"({', '.join(qn(f.column) for f in fields)}) VALUES ({placeholders})"
    )
    if connection.features.can_return_columns_from_insert:
        sql += f" RETURNING {qn(model._meta.pk.column)}"
    return sql, fields


def _insert(obj: Model) -> None:
    """``obj.save(force_insert=True)`` for the two rows every stored upload writes (``Evidence``,
    ``UploadLog``), without compiling the INSERT each time: the ORM spent more CPU building
    and compiling these two statements than the verification spent checking the signature
    (docs/benchmarks.md). The values go through each field's own ``pre_save`` and
    ``get_db_prep_save``, exactly as ``save`` prepares them; no signal listens to these models.
    """
    model = type(obj)
    sql, fields = _insert_sql_for(model, connection.vendor)
    values = [f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, values)
        if connection.features.can_return_columns_from_insert:
            pk = cursor.fetchone()[0]
        else:
            pk = connection.ops.last_insert_id(cursor, model._meta.db_table, model._meta.pk.column)
    obj.pk = pk
    obj._state.adding = False
    obj._state.db = connection.alias


def _store(
    fields: dict[str, Any],
    *,
    decision: SignerDecision,
    allowlist_row: Allowlist | None,
    common: dict[str, Any],
) -> IngestResult:
    """One transaction: signer, ``Evidence`` and ``UploadLog`` rows, or none of them.

    Race: the same statement (in any wrapper) uploaded twice at once. Both see no record; the
    unique ``(signer, payload_sha256)`` (or ``sha256``) decides at the loser's insert, whose
    whole transaction (signer included) rolls back. It then answers with the winner's record in
    a second transaction (no savepoint per upload).
    """
    try:
        with transaction.atomic():
            return _store_once(
                fields, decision=decision, allowlist_row=allowlist_row, common=common
            )
    except IntegrityError:
        with transaction.atomic():
            _, evidence = _known(fields, decision)
            if evidence is None:  # the same bytes as a duplicate migration 0005 withdrew
                evidence = (
                    Evidence.objects.select_related("signer")
                    .defer("content", "artifact")
                    .filter(sha256=fields["sha256"])
                    .first()
                )
            if evidence is None:
                raise
            return _stored(evidence, created=False, fields=fields, decision=decision, common=common)


def _store_once(
    fields: dict[str, Any],
    *,
    decision: SignerDecision,
    allowlist_row: Allowlist | None,
    common: dict[str, Any],
) -> IngestResult:
    signer, evidence = _existing(fields, decision)
    if evidence is not None:
        return _stored(evidence, created=False, fields=fields, decision=decision, common=common)
    if signer is None:  # first seen: created with its first class-history entry
        signer = signers.signer_upsert(decision, allowlist_row=allowlist_row)
    evidence = Evidence(signer=signer, **fields)
    _insert(evidence)
    refresh_consensus(evidence)  # the recipe's stored consensus badge, in this transaction
    return _stored(evidence, created=True, fields=fields, decision=decision, common=common)


def _stored(
    evidence: Evidence,
    *,
    created: bool,
    fields: dict[str, Any],
    decision: SignerDecision,
    common: dict[str, Any],
) -> IngestResult:
    signer_row: Signer = evidence.signer
    summary = decision.summary() | {
        "class": signer_row.signer_class,
        "counted": signer_row.counted,
        "label": signer_row.label,
        "slug": signer_row.slug,
    }
    result = IngestResult(
        evidence=evidence,
        created=created,
        verdict=Verdict.VERIFIED,
        failed_step="",
        signer=summary,
        transcript=fields["transcript"],
        reason="" if created else _known_reason(evidence, fields),
        http_status=STATUS_CREATED if created else STATUS_EXISTING,
    )
    _log(result=result, **common)
    return result


def _known_reason(evidence: Evidence, fields: dict[str, Any]) -> str:
    """Why an upload answered with an existing record (and that a withdrawal still holds)."""
    if evidence.sha256 == fields["sha256"]:
        what = "has these exact bytes"
    else:
        what = (
            "is this signed statement by this signer (payload sha256:"
            f"{fields['payload_sha256'][:12]}…), uploaded in another wrapper"
        )
    reason = f"already known: evidence #{evidence.pk} {what}; nothing new was stored"
    if evidence.withdrawn_at is not None:
        reason += (
            f"; it was withdrawn on {evidence.withdrawn_at:%Y-%m-%d %H:%M} UTC "
            f"({evidence.withdrawal_reason}) and stays withdrawn: not counted"
        )
    return reason


def _unavailable(exc: OperationalError, **common: Any) -> IngestResult:
    """The answer to an upload the database could not take, with its upload-log row (retried:
    the same contention may hold for a moment); a log that cannot be written is logged."""
    problem = " ".join(str(exc).split())[:200] or type(exc).__name__
    reason = (
        f"the database could not store this upload now ({problem}); nothing was stored: "
        f"retry in {RETRY_AFTER_SECONDS} seconds"
    )
    logger.warning("upload not stored: %s", problem)
    result = IngestResult(
        evidence=None,
        created=False,
        verdict="",
        failed_step="store",
        signer={},
        transcript=[{"step": "store", "ok": False, "detail": reason}],
        reason=reason,
        http_status=STATUS_UNAVAILABLE,
        retry_after=RETRY_AFTER_SECONDS,
    )
    upload = common.pop("upload")
    failure = ""
    for pause in LOG_WRITE_PAUSES:
        time.sleep(pause)
        try:
            # A row read earlier (OCI) may hold state the failed transaction rolled back.
            log = UploadLog.objects.get(pk=upload.pk) if upload is not None else None
            _log(upload=log, result=result, **common)
            return result
        except OperationalError as again:
            failure = " ".join(str(again).split())[:200]
    logger.error(
        "upload log NOT written after %d tries (%s); the refused upload was: channel=%s "
        "sha256=%s size=%s: %s",
        len(LOG_WRITE_PAUSES),
        failure,
        common["channel"],
        common["sha256"],
        common["size"],
        reason,
    )
    return result


# Room for the multipart framing and the other form fields around the file(s).
MULTIPART_OVERHEAD = 64 * 1024


def refuse_if_too_large(
    *, content_length: str | None, user: Any, channel: str
) -> IngestResult | None:
    """Refuse (and log) an upload whose declared ``Content-Length`` is over the limit, before
    any of the body is read; ``None`` when it may be read."""
    limit = max_upload_bytes()
    declared = content_length or "0"
    size = int(declared) if declared.isdigit() else 0
    if size <= limit + MULTIPART_OVERHEAD:
        return None
    reason = (
        f"upload of {size:,} bytes exceeds the limit of {limit:,} bytes (EVIDENCE_MAX_UPLOAD_BYTES)"
    )
    return upload_refused(
        user=user, channel=channel, size=size, reason=reason, http_status=STATUS_TOO_LARGE
    )


def upload_refused(
    *,
    user: Any,
    channel: str,
    size: int,
    reason: str,
    http_status: int = STATUS_REFUSED,
    filename: str = "",
) -> IngestResult:
    """Record an upload refused before its bytes were read (e.g. too large). The refusal
    stands even when the database cannot take its log row (then the error log says so)."""
    result = _failure(
        [{"step": "parse", "ok": False, "detail": reason}],
        verdict=Verdict.REJECTED,
        step="parse",
        reason=reason,
        http_status=http_status,
    )
    try:
        _log(
            upload=None,
            user=user,
            channel=channel,
            sha256="",
            size=min(max(size, 0), 2**31 - 1),
            filename=filename,
            oci_ref="",
            result=result,
        )
    except OperationalError as exc:
        if connection.in_atomic_block:
            raise
        logger.error("upload log NOT written (%s) for a refused upload: %s", exc, reason)
    return result
