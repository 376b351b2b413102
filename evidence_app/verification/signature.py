"""Offline signature verification of Sigstore bundles: keyless here (sigstore-python), key-signed
DSSE / message signatures in ``keyed`` (``cryptography``); ``verify_signature`` picks one.

Outcomes, never exceptions, for anything the bundle bytes can cause: ``status`` is ``ok``
(verified), ``invalid`` (checked and failed, or malformed) or ``unsupported`` (a format these
verifiers cannot check: Rekor ``intoto`` entries, bundles without a transparency-log entry,
multi-signature DSSE, future bundle versions, legacy cosign bundles, non-P-256/Ed25519 keys).
Programming errors (no issuer given for keyless verification, an empty identity) raise
``ValueError``.

Identity pinning (keyless). The sigstore policy always pins the issuer **and** an exact identity:

* an expected ``identity`` given → ``Identity(identity=identity, issuer=issuer)``;
* only ``identity_regex`` given, or nothing (to *learn* the signer for classification) → the
  SAN is read from the bundle's certificate, checked against the regex (``re.fullmatch``) when
  one is given, and then pinned exactly: ``Identity(identity=<that SAN>, issuer=issuer)``.

Why a forged claim cannot pass: the pinned values are read from the very certificate object
(``Bundle.signing_certificate``) that ``Verifier.verify_dsse``/``verify_artifact`` then
verifies in the same call — chain to a Fulcio CA of the trusted root at the log-/TSA-verified
signing time, embedded SCT from a trusted CT log, inclusion proof + signed checkpoint (+ SET)
from a trusted Rekor key, and the signature itself with that certificate's key. Any change to
the SAN or issuer bytes breaks the CA signature over the certificate, so the chain check fails;
a certificate genuinely issued for another identity fails the exact policy. The issuer must be
one of the caller's expected issuers — unless the caller asks to ``report_unlisted_issuers``:
then a certificate whose issuer is not listed is verified with that issuer pinned exactly as the
SAN is (read from the very certificate the chain check then verifies, so it cannot be forged),
and the outcome says ``SignerClaims.issuer_listed`` is false — a good signature by a signer
whose identity provider the caller does not vouch for (the site reports such evidence, never
counts it). The claims reported in the outcome are read from the same, now verified,
certificate. Extra policies (e.g. ``OIDCSourceRepositoryURI``) are added with ``AllOf``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .bundle import ParsedBundle
from .certificate import (
    CertificateClaimError,
    certificate_identities,
    certificate_issuers,
    certificate_sha256,
    fulcio_claims,
)
from .keyed import verify_keyed_parsed
from .outcome import (
    SignatureOutcome,
    SignerClaims,
    Status,
    artifact_digest,
    failure,
    one_line,
    parsed_or_failure,
    subject_mismatch,
)
from .trust import TrustRoot

# The outcome types are also importable from here, where they are produced.
__all__ = [
    "EXTRA_POLICY_NAMES",
    "SignatureOutcome",
    "SignerClaims",
    "verify_keyless",
    "verify_signature",
]


logger = logging.getLogger(__name__)

_SUPPORTED_KEYLESS_ENTRIES = {"dsse/0.0.1", "hashedrekord/0.0.1", "hashedrekord/0.0.2"}

# Extra policies by name (as in the fixtures' expected.json): sigstore.verify.policy classes
# that take one string value.
EXTRA_POLICY_NAMES = frozenset(
    {
        "OIDCIssuer",
        "OIDCIssuerV2",
        "OIDCBuildSignerURI",
        "OIDCBuildSignerDigest",
        "OIDCRunnerEnvironment",
        "OIDCSourceRepositoryURI",
        "OIDCSourceRepositoryDigest",
        "OIDCSourceRepositoryRef",
        "OIDCSourceRepositoryIdentifier",
        "OIDCSourceRepositoryOwnerURI",
        "OIDCSourceRepositoryOwnerIdentifier",
        "OIDCBuildConfigURI",
        "OIDCBuildConfigDigest",
        "OIDCBuildTrigger",
        "OIDCRunInvocationURI",
        "OIDCSourceRepositoryVisibility",
        "GitHubWorkflowTrigger",
        "GitHubWorkflowSHA",
        "GitHubWorkflowName",
        "GitHubWorkflowRepository",
        "GitHubWorkflowRef",
    }
)


# --------------------------------------------------------------------------------------------
# keyless


def _policy_for(name: str, value: object) -> Any:
    # ``value`` comes from a maintainer's configuration, so it is checked, not trusted.
    from sigstore.verify import policy

    if name not in EXTRA_POLICY_NAMES:
        raise ValueError(f"unknown extra policy {name!r}")
    if not isinstance(value, str) or not value:
        raise ValueError(f"extra policy {name} needs a non-empty string")
    return getattr(policy, name)(value)


def _extra_policies(extra: Mapping[str, str] | Iterable[Any] | None) -> list[Any]:
    if not extra:
        return []
    if isinstance(extra, Mapping):
        return [_policy_for(name, value) for name, value in extra.items()]
    return list(extra)


def _issuers(issuer: str | Iterable[object] | None) -> list[str]:
    if issuer is None:
        raise ValueError("keyless verification needs the expected OIDC issuer(s)")
    values = [issuer] if isinstance(issuer, str) else list(issuer)
    strings = [v for v in values if isinstance(v, str) and v.strip()]
    if not values or len(strings) != len(values):
        raise ValueError("expected issuers must be non-empty strings")
    return strings


def _sigstore_error(exc: BaseException) -> tuple[Status, str]:
    from sigstore.dsse import InvalidEnvelope
    from sigstore.errors import Error as SigstoreError
    from sigstore.models import IncompatibleEntry

    lines = str(exc).splitlines()
    first = lines[0] if lines else ""
    if isinstance(exc, IncompatibleEntry):
        return "unsupported", f"unsupported transparency log entry: {first}"
    unsupported_markers = (
        "Integrated time only supported",
        "Unsupported DSSE log entry type",
        "exactly one signature",
        "Unsupported hashedrekord version",
    )
    if any(marker in first for marker in unsupported_markers):
        return "unsupported", f"{type(exc).__name__}: {first}"
    if isinstance(exc, InvalidEnvelope | SigstoreError):
        name = type(exc).__name__
        if first.startswith("failed to load bundle") and len(lines) > 1:
            first = f"{first} {lines[1].strip()}"
        return "invalid", f"{name}: {first}"
    return "invalid", f"malformed bundle ({type(exc).__name__}: {first})"


def _keyless_precheck(parsed: ParsedBundle) -> SignatureOutcome | None:
    if not parsed.has_certificate:
        return failure(
            "invalid",
            "bundle has no signing certificate (key-signed?); keyless verification needs one",
            parsed=parsed,
            mode="keyless",
        )
    if not parsed.tlog_entries:
        return failure(
            "unsupported",
            "bundle has no transparency log entry (e.g. a GitHub private-instance "
            "attestation); not verifiable offline here",
            parsed=parsed,
            mode="keyless",
        )
    if len(parsed.tlog_entries) != 1:
        return failure(
            "unsupported",
            f"bundle has {len(parsed.tlog_entries)} transparency log entries; exactly one is "
            "supported",
            parsed=parsed,
            mode="keyless",
        )
    kv = parsed.tlog_entries[0].kind_version
    if kv not in _SUPPORTED_KEYLESS_ENTRIES:
        return failure(
            "unsupported",
            f"transparency log entry kind {kv[:60]!r} is not supported "
            "(dsse/0.0.1, hashedrekord/0.0.1, hashedrekord/0.0.2 are)",
            parsed=parsed,
            mode="keyless",
        )
    if parsed.content == "dsse" and len(parsed.signatures) != 1:
        return failure(
            "unsupported",
            f"DSSE envelope has {len(parsed.signatures)} signatures; exactly one is supported",
            parsed=parsed,
            mode="keyless",
        )
    return None


def _to_datetime(seconds: int | None) -> datetime | None:
    if seconds is None:
        return None
    try:
        return datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _tsa_time(bundle: Any) -> datetime | None:
    try:
        tsv = bundle.verification_material.timestamp_verification_data
        if tsv is None or not tsv.rfc3161_timestamps:
            return None
        gen: datetime = tsv.rfc3161_timestamps[0].tst_info.gen_time
        return gen if gen.tzinfo else gen.replace(tzinfo=UTC)
    except Exception:  # display only; the verifier already checked the token
        return None


@dataclass(frozen=True)
class _Pinned:
    """The identity and issuer the sigstore policy pins, read from the signing certificate."""

    identity: str
    issuer: str
    issuer_listed: bool


@dataclass(frozen=True)
class _Verified:
    """The trusted root that verified the bundle, and the DSSE payload (None for a message
    signature)."""

    root: TrustRoot
    payload_type: str | None
    payload: bytes | None


def _keyless_arguments(
    trusted_root: TrustRoot | Sequence[TrustRoot],
    *,
    identity: str | None,
    identity_regex: str | None,
    issuer: str | Iterable[str],
    extra_policies: Mapping[str, str] | Iterable[Any] | None,
) -> tuple[list[TrustRoot], list[str], re.Pattern[str] | None, list[Any]]:
    """The caller's roots, issuers, identity pattern and extra policies; ``ValueError`` for a
    programming error (no root, no issuer, an empty identity)."""
    roots = [trusted_root] if isinstance(trusted_root, TrustRoot) else list(trusted_root)
    if not roots:
        raise ValueError("keyless verification needs at least one trusted root")
    issuers = _issuers(issuer)
    if identity is not None and not identity.strip():
        raise ValueError("expected identity must not be empty")
    pattern = re.compile(identity_regex) if identity_regex is not None else None
    return roots, issuers, pattern, _extra_policies(extra_policies)


def _pin_signer(
    claims: Mapping[str, Any],
    sans: Sequence[str],
    *,
    issuers: Sequence[str],
    identity: str | None,
    pattern: re.Pattern[str] | None,
    report_unlisted_issuers: bool,
) -> _Pinned | str:
    """The pinned identity and issuer, or why the certificate cannot be pinned (invalid)."""
    cert_issuers = certificate_issuers(claims)
    # The issuer is pinned to a caller-expected value, or (report_unlisted_issuers) to the
    # certificate's own value, flagged as unlisted.
    if not cert_issuers:
        return "signing certificate carries no OIDC issuer extension"
    if len(cert_issuers) != 1:
        return "signing certificate carries two different OIDC issuers"
    pinned_issuer = cert_issuers[0]
    issuer_listed = pinned_issuer in issuers
    if not issuer_listed and not report_unlisted_issuers:
        return f"certificate claims issuer {pinned_issuer!r}, expected {', '.join(issuers)}"
    if identity is not None:
        if pattern is not None and not pattern.fullmatch(identity):
            return "expected identity does not match the expected pattern"
        return _Pinned(identity, pinned_issuer, issuer_listed)
    if len(sans) != 1:
        return f"signing certificate has {len(sans)} identities; exactly one is required"
    if pattern is not None and not pattern.fullmatch(sans[0]):
        return f"certificate identity {sans[0]!r} does not match the expected pattern"
    return _Pinned(sans[0], pinned_issuer, issuer_listed)


def _keyless_policy(pinned: _Pinned, claims: Mapping[str, Any], extra: list[Any]) -> Any:
    """``AllOf``: the exact identity and issuer (v1 and, when present, v2), then the extras."""
    from sigstore.verify import policy

    children: list[Any] = [
        policy.Identity(
            identity=pinned.identity,
            issuer=pinned.issuer if "issuer_v1" in claims else None,
        )
    ]
    if "issuer" in claims:  # the DER (v2) issuer extension, pinned too when present
        children.append(policy.OIDCIssuerV2(pinned.issuer))
    children.extend(extra)
    return policy.AllOf(children)


def _verify_with_roots(
    parsed: ParsedBundle, bundle: Any, pol: Any, roots: list[TrustRoot], digest: str | None
) -> _Verified | SignatureOutcome:
    """The first root whose verifier accepts the bundle; else every root's reason (an
    ``unsupported`` answer stops the search: no other root can do better)."""
    from sigstore.hashes import Hashed
    from sigstore_models.common.v1 import HashAlgorithm

    errors: list[tuple[Status, str, str]] = []
    for root in roots:
        try:
            if parsed.content == "dsse":
                payload_type, payload = root.verifier.verify_dsse(bundle, pol)
                return _Verified(root, payload_type, payload)
            hashed = Hashed(algorithm=HashAlgorithm.SHA2_256, digest=bytes.fromhex(digest or ""))
            root.verifier.verify_artifact(hashed, bundle, pol)
            return _Verified(root, None, None)
        except Exception as exc:
            status, detail = _sigstore_error(exc)
            if status != "unsupported" and not _is_expected_error(exc):
                logger.warning("unexpected error verifying bundle %s", parsed.sha256, exc_info=True)
            errors.append((status, root.name, detail))
            if status == "unsupported":
                break
    if len(errors) == 1 or len(roots) == 1:
        status, _, detail = errors[0]
        return failure(status, detail, parsed=parsed, mode="keyless")
    status = "unsupported" if any(e[0] == "unsupported" for e in errors) else "invalid"
    detail = "; ".join(f"{name}: {detail}" for _, name, detail in errors)
    return failure(status, detail, parsed=parsed, mode="keyless")


def _verify_keyless_parsed(
    parsed: ParsedBundle,
    *,
    trusted_root: TrustRoot | Sequence[TrustRoot],
    identity: str | None,
    identity_regex: str | None,
    issuer: str | Iterable[str],
    extra_policies: Mapping[str, str] | Iterable[Any] | None,
    digest: str | None,
    report_unlisted_issuers: bool = False,
) -> SignatureOutcome:
    from sigstore.models import Bundle

    roots, issuers, pattern, extra = _keyless_arguments(
        trusted_root,
        identity=identity,
        identity_regex=identity_regex,
        issuer=issuer,
        extra_policies=extra_policies,
    )

    def fail(status: Status, detail: str) -> SignatureOutcome:
        return failure(status, detail, parsed=parsed, mode="keyless")

    failed = _keyless_precheck(parsed)
    if failed is not None:
        return failed
    if parsed.content == "message_signature" and digest is None:
        return fail(
            "unsupported",
            "a message signature can only be verified against the signed artifact (none was given)",
        )
    try:
        bundle = Bundle.from_json(parsed.raw)
    except Exception as exc:  # sigstore.errors.Error, and bare ValueError for corrupt DER
        return fail(*_sigstore_error(exc))

    cert = bundle.signing_certificate
    try:
        claims = fulcio_claims(cert)
    except (CertificateClaimError, ValueError) as exc:
        return fail("invalid", f"cannot read the signing certificate: {exc}")
    pinned = _pin_signer(
        claims,
        certificate_identities(cert),
        issuers=issuers,
        identity=identity,
        pattern=pattern,
        report_unlisted_issuers=report_unlisted_issuers,
    )
    if isinstance(pinned, str):
        return fail("invalid", pinned)
    verified = _verify_with_roots(
        parsed, bundle, _keyless_policy(pinned, claims, extra), roots, digest
    )
    if isinstance(verified, SignatureOutcome):
        return verified
    if parsed.content == "dsse" and digest is not None:
        assert verified.payload_type is not None
        assert verified.payload is not None
        reason = subject_mismatch(verified.payload_type, verified.payload, digest)
        if reason is not None:
            return fail("invalid", reason)
    return _keyless_outcome(parsed, bundle, claims, pinned, verified)


def _keyless_outcome(
    parsed: ParsedBundle,
    bundle: Any,
    claims: Mapping[str, Any],
    pinned: _Pinned,
    verified: _Verified,
) -> SignatureOutcome:
    """The verified outcome: the signer's claims, read from the now verified certificate."""
    cert = bundle.signing_certificate
    entry = parsed.tlog_entries[0]
    signer = SignerClaims(
        mode="keyless",
        identity=pinned.identity,
        issuer=pinned.issuer,
        issuer_listed=pinned.issuer_listed,
        claims=dict(claims),
        certificate_sha256=certificate_sha256(cert),
        certificate_not_before=cert.not_valid_before_utc,
        certificate_not_after=cert.not_valid_after_utc,
        trusted_root=verified.root.name,
        production_root=verified.root.production,
        tlog_kind=entry.kind_version,
        rekor_log_index=entry.log_index,
        rekor_log_id=entry.log_id.hex() if entry.log_id else None,
        integrated_time=_to_datetime(entry.integrated_time)
        if entry.has_inclusion_promise
        else None,
        timestamp_authority_time=_tsa_time(bundle),
    )
    what = "DSSE" if parsed.content == "dsse" else "message signature"
    return SignatureOutcome(
        status="ok",
        detail=one_line(
            f"keyless {what} verified: {pinned.identity} via {pinned.issuer} "
            f"(trusted root {verified.root.name})"
            + ("" if pinned.issuer_listed else "; the issuer is not one this site accepts")
        ),
        mode="keyless",
        content=parsed.content,
        payload_type=verified.payload_type,
        payload=verified.payload,
        signer=signer,
        bundle_sha256=parsed.sha256,
        media_type=parsed.media_type,
        has_tlog_entry=True,
        rekor_v2=entry.kind_version == "hashedrekord/0.0.2",
    )


def _is_expected_error(exc: BaseException) -> bool:
    from sigstore.dsse import InvalidEnvelope
    from sigstore.errors import Error as SigstoreError

    return isinstance(exc, SigstoreError | InvalidEnvelope)


def verify_keyless(
    bundle_bytes: bytes | str | ParsedBundle,
    *,
    trusted_root: TrustRoot | Sequence[TrustRoot],
    identity: str | None = None,
    identity_regex: str | None = None,
    issuer: str | Iterable[str],
    extra_policies: Mapping[str, str] | Iterable[Any] | None = None,
    artifact: bytes | None = None,
    artifact_sha256: str | None = None,
) -> SignatureOutcome:
    """Verify a keyless (Fulcio certificate) bundle offline against ``trusted_root``.

    ``issuer``: the expected OIDC issuer, or a collection of acceptable ones (pinned exactly).
    ``identity``: the exact expected SAN; ``identity_regex``: a pattern it must fully match;
    neither: learn the SAN and pin it exactly (see the module docstring).
    ``extra_policies``: ``{"OIDCSourceRepositoryURI": "https://github.com/o/r", …}`` or
    sigstore policy objects. ``artifact``/``artifact_sha256``: the signed file — required for
    message signatures; for DSSE its sha256 must be one of the statement's subjects.
    With several trusted roots, the first that verifies wins.
    """
    digest = artifact_digest(artifact, artifact_sha256)
    parsed = parsed_or_failure(bundle_bytes)
    if isinstance(parsed, SignatureOutcome):
        return parsed
    return _verify_keyless_parsed(
        parsed,
        trusted_root=trusted_root,
        identity=identity,
        identity_regex=identity_regex,
        issuer=issuer,
        extra_policies=extra_policies,
        digest=digest,
    )


# --------------------------------------------------------------------------------------------
# either


def verify_signature(
    bundle_bytes: bytes | str | ParsedBundle,
    *,
    trusted_root: TrustRoot | Sequence[TrustRoot] | None = None,
    identity: str | None = None,
    identity_regex: str | None = None,
    issuer: str | Iterable[str] | None = None,
    extra_policies: Mapping[str, str] | Iterable[Any] | None = None,
    public_keys: Sequence[bytes | str] | Mapping[str, bytes | str] = (),
    artifact: bytes | None = None,
    artifact_sha256: str | None = None,
    report_unlisted_issuers: bool = False,
) -> SignatureOutcome:
    """Verify keyless when the bundle carries a certificate, else key-signed (publicKey hint or a
    bare DSSE envelope) against ``public_keys``. Keyless needs ``trusted_root`` and ``issuer``
    (``ValueError`` otherwise); ``report_unlisted_issuers``: see the module docstring."""
    digest = artifact_digest(artifact, artifact_sha256)
    parsed = parsed_or_failure(bundle_bytes)
    if isinstance(parsed, SignatureOutcome):
        return parsed
    if parsed.has_certificate:
        if trusted_root is None:
            raise ValueError("keyless bundle: a trusted root is required")
        return _verify_keyless_parsed(
            parsed,
            trusted_root=trusted_root,
            identity=identity,
            identity_regex=identity_regex,
            issuer=_issuers(issuer),
            extra_policies=extra_policies,
            digest=digest,
            report_unlisted_issuers=report_unlisted_issuers,
        )
    return verify_keyed_parsed(parsed, public_keys=public_keys, artifact=artifact, digest=digest)
