"""Offline signature verification of Sigstore bundles: keyless (sigstore-python) and key-signed
DSSE / message signatures (``cryptography``).

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

import base64
import functools
import hashlib
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed

from ._json import JSONLimitError, JSONLimits, load_json
from .bundle import IN_TOTO_PAYLOAD_TYPE, BundleError, ParsedBundle, parse_bundle
from .certificate import (
    CertificateClaimError,
    certificate_identities,
    certificate_issuers,
    certificate_sha256,
    fulcio_claims,
    public_key_fingerprint,
)
from .trust import TrustRoot

logger = logging.getLogger(__name__)

Status = Literal["ok", "invalid", "unsupported"]
Mode = Literal["keyless", "key"]
MAX_DETAIL = 400
_PAYLOAD_LIMITS = JSONLimits(max_bytes=1_000_000, max_depth=64, max_object_keys=1_000)
_SUPPORTED_KEYLESS_ENTRIES = {"dsse/0.0.1", "hashedrekord/0.0.1", "hashedrekord/0.0.2"}
_HEX64 = re.compile(r"[0-9a-fA-F]{64}")

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


@dataclass(frozen=True)
class SignerClaims:
    """Who signed, as established by verification (never from unverified bundle text)."""

    mode: Mode
    # keyless
    identity: str | None = None
    issuer: str | None = None
    claims: Mapping[str, str] = field(default_factory=dict)
    certificate_sha256: str | None = None
    certificate_not_before: datetime | None = None
    certificate_not_after: datetime | None = None
    trusted_root: str | None = None
    production_root: bool = False
    tlog_kind: str | None = None
    rekor_log_index: int | None = None
    rekor_log_id: str | None = None
    integrated_time: datetime | None = None
    timestamp_authority_time: datetime | None = None
    issuer_listed: bool = True  # False: verified, but not one of the caller's expected issuers
    # key-signed
    key_fingerprint: str | None = None
    key_id: str | None = None
    key_index: int | None = None

    @property
    def signed_at(self) -> datetime | None:
        """The verified signing time (Rekor v1 integrated time, else the TSA time)."""
        return self.integrated_time or self.timestamp_authority_time

    # GitHub Actions conveniences: the current Fulcio claims, else the deprecated 1.2-1.6 ones.
    @property
    def repository(self) -> str | None:
        return self.claims.get("source_repository_uri") or self.claims.get(
            "github_workflow_repository"
        )

    @property
    def ref(self) -> str | None:
        return self.claims.get("source_repository_ref") or self.claims.get("github_workflow_ref")

    @property
    def sha(self) -> str | None:
        return self.claims.get("source_repository_digest") or self.claims.get("github_workflow_sha")

    @property
    def workflow_trigger(self) -> str | None:
        return self.claims.get("build_trigger") or self.claims.get("github_workflow_trigger")

    @property
    def workflow_name(self) -> str | None:
        return self.claims.get("github_workflow_name")

    @property
    def workflow_ref(self) -> str | None:
        """The caller workflow (build config URI), e.g. ``…/.github/workflows/x.yml@refs/…``."""
        return self.claims.get("build_config_uri")

    @property
    def run_invocation_uri(self) -> str | None:
        return self.claims.get("run_invocation_uri")

    @property
    def runner_environment(self) -> str | None:
        return self.claims.get("runner_environment")


@dataclass(frozen=True)
class SignatureOutcome:
    status: Status
    detail: str
    mode: Mode | None = None
    step: Literal["parse", "signature"] = "signature"
    content: Literal["dsse", "message_signature"] | None = None
    payload_type: str | None = None
    payload: bytes | None = field(default=None, repr=False)
    signer: SignerClaims | None = None
    bundle_sha256: str | None = None
    media_type: str | None = None
    has_tlog_entry: bool = False
    rekor_v2: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def is_in_toto(self) -> bool:
        return self.ok and self.payload_type == IN_TOTO_PAYLOAD_TYPE and self.payload is not None


def _one_line(text: str) -> str:
    line = " ".join((text or "").split())
    return line if len(line) <= MAX_DETAIL else line[: MAX_DETAIL - 1] + "…"


def _fail(
    status: Status,
    detail: str,
    *,
    parsed: ParsedBundle | None = None,
    mode: Mode | None = None,
    step: Literal["parse", "signature"] = "signature",
) -> SignatureOutcome:
    return SignatureOutcome(
        status=status,
        detail=_one_line(detail),
        mode=mode,
        step=step,
        content=parsed.content if parsed else None,
        bundle_sha256=parsed.sha256 if parsed else None,
        media_type=parsed.media_type if parsed else None,
        has_tlog_entry=bool(parsed and parsed.tlog_entries),
    )


def _parse(bundle: bytes | str | ParsedBundle) -> ParsedBundle | SignatureOutcome:
    if isinstance(bundle, ParsedBundle):
        return bundle
    try:
        return parse_bundle(bundle)
    except BundleError as exc:
        return _fail("unsupported" if exc.unsupported else "invalid", str(exc), step="parse")


def _artifact_digest(artifact: bytes | None, artifact_sha256: str | None) -> str | None:
    if artifact is not None:
        digest = hashlib.sha256(artifact).hexdigest()
        if artifact_sha256 is not None and artifact_sha256.lower() != digest:
            raise ValueError("artifact and artifact_sha256 disagree")
        return digest
    if artifact_sha256 is not None:
        if not _HEX64.fullmatch(artifact_sha256):
            raise ValueError("artifact_sha256 must be 64 hex digits")
        return artifact_sha256.lower()
    return None


def _subject_check(payload_type: str, payload: bytes, digest: str) -> str | None:
    """None when ``digest`` is the sha256 of one of the statement's subjects, else the reason."""
    if payload_type != IN_TOTO_PAYLOAD_TYPE:
        return f"payloadType {payload_type[:80]!r} is not in-toto; cannot match the artifact"
    try:
        statement = load_json(payload, what="payload", limits=_PAYLOAD_LIMITS)
    except JSONLimitError as exc:
        return f"cannot match the artifact: {exc}"
    subjects = statement.get("subject") if isinstance(statement, dict) else None
    if not isinstance(subjects, list):
        return "cannot match the artifact: the statement has no subject list"
    for subject in subjects:
        if isinstance(subject, dict) and isinstance(subject.get("digest"), dict):
            value = subject["digest"].get("sha256")
            if isinstance(value, str) and value.lower() == digest:
                return None
    return f"artifact sha256 {digest} is not among the in-toto subjects"


# --------------------------------------------------------------------------------------------
# keyless


def _policy_for(name: str, value: str) -> Any:
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


def _issuers(issuer: str | Iterable[str] | None) -> list[str]:
    if issuer is None:
        raise ValueError("keyless verification needs the expected OIDC issuer(s)")
    values = [issuer] if isinstance(issuer, str) else list(issuer)
    if not values or any(not isinstance(v, str) or not v.strip() for v in values):
        raise ValueError("expected issuers must be non-empty strings")
    return values


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
        return _fail(
            "invalid",
            "bundle has no signing certificate (key-signed?); keyless verification needs one",
            parsed=parsed,
            mode="keyless",
        )
    if not parsed.tlog_entries:
        return _fail(
            "unsupported",
            "bundle has no transparency log entry (e.g. a GitHub private-instance "
            "attestation); not verifiable offline here",
            parsed=parsed,
            mode="keyless",
        )
    if len(parsed.tlog_entries) != 1:
        return _fail(
            "unsupported",
            f"bundle has {len(parsed.tlog_entries)} transparency log entries; exactly one is "
            "supported",
            parsed=parsed,
            mode="keyless",
        )
    kv = parsed.tlog_entries[0].kind_version
    if kv not in _SUPPORTED_KEYLESS_ENTRIES:
        return _fail(
            "unsupported",
            f"transparency log entry kind {kv[:60]!r} is not supported "
            "(dsse/0.0.1, hashedrekord/0.0.1, hashedrekord/0.0.2 are)",
            parsed=parsed,
            mode="keyless",
        )
    if parsed.content == "dsse" and len(parsed.signatures) != 1:
        return _fail(
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
        gen = tsv.rfc3161_timestamps[0].tst_info.gen_time
        return gen if gen.tzinfo else gen.replace(tzinfo=UTC)
    except Exception:  # display only; the verifier already checked the token
        return None


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
    from sigstore.hashes import Hashed
    from sigstore.models import Bundle
    from sigstore.verify import policy
    from sigstore_models.common.v1 import HashAlgorithm

    roots = [trusted_root] if isinstance(trusted_root, TrustRoot) else list(trusted_root)
    if not roots:
        raise ValueError("keyless verification needs at least one trusted root")
    issuers = _issuers(issuer)
    if identity is not None and not identity.strip():
        raise ValueError("expected identity must not be empty")
    pattern = re.compile(identity_regex) if identity_regex is not None else None
    extra = _extra_policies(extra_policies)

    failed = _keyless_precheck(parsed)
    if failed is not None:
        return failed
    if parsed.content == "message_signature" and digest is None:
        return _fail(
            "unsupported",
            "a message signature can only be verified against the signed artifact (none was given)",
            parsed=parsed,
            mode="keyless",
        )

    def fail(status: Status, detail: str) -> SignatureOutcome:
        return _fail(status, detail, parsed=parsed, mode="keyless")

    try:
        bundle = Bundle.from_json(parsed.raw)
    except Exception as exc:  # sigstore.errors.Error, and bare ValueError for corrupt DER
        status, detail = _sigstore_error(exc)
        return fail(status, detail)

    cert = bundle.signing_certificate
    try:
        claims = fulcio_claims(cert)
    except (CertificateClaimError, ValueError) as exc:
        return fail("invalid", f"cannot read the signing certificate: {exc}")
    sans = certificate_identities(cert)
    cert_issuers = certificate_issuers(claims)

    # The issuer is pinned to a caller-expected value, or (report_unlisted_issuers) to the
    # certificate's own value, flagged as unlisted.
    if not cert_issuers:
        return fail("invalid", "signing certificate carries no OIDC issuer extension")
    if len(cert_issuers) != 1:
        return fail("invalid", "signing certificate carries two different OIDC issuers")
    pinned_issuer = cert_issuers[0]
    issuer_listed = pinned_issuer in issuers
    if not issuer_listed and not report_unlisted_issuers:
        expected = ", ".join(issuers)
        return fail(
            "invalid",
            f"certificate claims issuer {pinned_issuer!r}, expected {expected}",
        )

    if identity is not None:
        pinned_identity = identity
        if pattern is not None and not pattern.fullmatch(identity):
            return fail("invalid", "expected identity does not match the expected pattern")
    else:
        if len(sans) != 1:
            return fail(
                "invalid",
                f"signing certificate has {len(sans)} identities; exactly one is required",
            )
        pinned_identity = sans[0]
        if pattern is not None and not pattern.fullmatch(pinned_identity):
            return fail(
                "invalid",
                f"certificate identity {pinned_identity!r} does not match the expected pattern",
            )

    children: list[Any] = [
        policy.Identity(
            identity=pinned_identity,
            issuer=pinned_issuer if "issuer_v1" in claims else None,
        )
    ]
    if "issuer" in claims:  # the DER (v2) issuer extension, pinned too when present
        children.append(policy.OIDCIssuerV2(pinned_issuer))
    children.extend(extra)
    pol = policy.AllOf(children)

    payload_type: str | None = None
    payload: bytes | None = None
    verified_root: TrustRoot | None = None
    errors: list[tuple[Status, str, str]] = []
    for root in roots:
        try:
            if parsed.content == "dsse":
                payload_type, payload = root.verifier.verify_dsse(bundle, pol)
            else:
                hashed = Hashed(
                    algorithm=HashAlgorithm.SHA2_256, digest=bytes.fromhex(digest or "")
                )
                root.verifier.verify_artifact(hashed, bundle, pol)
        except Exception as exc:
            status, detail = _sigstore_error(exc)
            if status != "unsupported" and not _is_expected_error(exc):
                logger.warning("unexpected error verifying bundle %s", parsed.sha256, exc_info=True)
            errors.append((status, root.name, detail))
            if status == "unsupported":
                break
            continue
        verified_root = root
        break
    if verified_root is None:
        if len(errors) == 1 or len(roots) == 1:
            status, _, detail = errors[0]
            return fail(status, detail)
        status = "unsupported" if any(e[0] == "unsupported" for e in errors) else "invalid"
        return fail(status, "; ".join(f"{name}: {detail}" for _, name, detail in errors))

    if parsed.content == "dsse" and digest is not None:
        assert payload_type is not None
        assert payload is not None
        reason = _subject_check(payload_type, payload, digest)
        if reason is not None:
            return fail("invalid", reason)

    entry = parsed.tlog_entries[0]
    signer = SignerClaims(
        mode="keyless",
        identity=pinned_identity,
        issuer=pinned_issuer,
        issuer_listed=issuer_listed,
        claims=dict(claims),
        certificate_sha256=certificate_sha256(cert),
        certificate_not_before=cert.not_valid_before_utc,
        certificate_not_after=cert.not_valid_after_utc,
        trusted_root=verified_root.name,
        production_root=verified_root.production,
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
        detail=_one_line(
            f"keyless {what} verified: {pinned_identity} via {pinned_issuer} "
            f"(trusted root {verified_root.name})"
            + ("" if issuer_listed else "; the issuer is not one this site accepts")
        ),
        mode="keyless",
        content=parsed.content,
        payload_type=payload_type,
        payload=payload,
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
    digest = _artifact_digest(artifact, artifact_sha256)
    parsed = _parse(bundle_bytes)
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
# key-signed


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE pre-authentication encoding (byte lengths, ASCII decimal)."""
    type_bytes = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(type_bytes), type_bytes, len(payload), payload)


@dataclass(frozen=True)
class _Key:
    key_id: str
    index: int
    key: Any
    fingerprint: str


def _hint_fingerprint(hint: str | None) -> str | None:
    """The sha256 hex a key hint names: b64(sha256(SPKI)) or npm's ``SHA256:<b64 no pad>``."""
    if not hint:
        return None
    text = hint[7:] if hint.upper().startswith("SHA256:") else hint
    try:
        raw = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except ValueError:
        return None
    return raw.hex() if len(raw) == 32 else None


@functools.lru_cache(maxsize=256)
def _load_pem(data: bytes) -> tuple[Any, str] | str:
    """(key, fingerprint) for a PEM public key, or the reason it cannot be used."""
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        return f"cannot load public key ({_one_line(str(exc))[:80]})"
    supported = isinstance(key, ed25519.Ed25519PublicKey) or (
        isinstance(key, ec.EllipticCurvePublicKey) and isinstance(key.curve, ec.SECP256R1)
    )
    if not supported:
        return "unsupported key type (ECDSA P-256 and Ed25519 only)"
    return key, public_key_fingerprint(key)


def _load_keys(
    public_keys: Sequence[bytes | str] | Mapping[str, bytes | str],
) -> tuple[list[_Key], list[str]]:
    items: list[tuple[str, bytes | str]]
    if isinstance(public_keys, Mapping):
        items = [(str(k), v) for k, v in public_keys.items()]
    else:
        items = [(str(i), v) for i, v in enumerate(public_keys)]
    keys: list[_Key] = []
    problems: list[str] = []
    for index, (key_id, pem) in enumerate(items):
        data = pem.encode("ascii", "replace") if isinstance(pem, str) else bytes(pem)
        loaded = _load_pem(data)
        if isinstance(loaded, str):
            problems.append(f"key {key_id}: {loaded}")
            continue
        key, fingerprint = loaded
        keys.append(_Key(key_id=key_id, index=index, key=key, fingerprint=fingerprint))
    return keys, problems


def _verify_with(key: Any, signature: bytes, data: bytes, *, prehashed: bool = False) -> bool:
    try:
        if isinstance(key, ed25519.Ed25519PublicKey):
            key.verify(signature, data)
        elif prehashed:
            key.verify(signature, data, ec.ECDSA(Prehashed(hashes.SHA256())))
        else:
            key.verify(signature, data, ec.ECDSA(hashes.SHA256()))
    except (InvalidSignature, ValueError):
        return False
    return True


def _verify_keyed_parsed(
    parsed: ParsedBundle,
    *,
    public_keys: Sequence[bytes | str] | Mapping[str, bytes | str],
    artifact: bytes | None,
    digest: str | None,
) -> SignatureOutcome:
    def fail(status: Status, detail: str) -> SignatureOutcome:
        return _fail(status, detail, parsed=parsed, mode="key")

    if parsed.has_certificate:
        return fail("invalid", "bundle carries a signing certificate (keyless); not key-signed")
    keys, problems = _load_keys(public_keys)
    if not keys:
        if problems and all("unsupported key type" in p for p in problems):
            return fail("unsupported", "; ".join(problems))
        if problems:
            return fail("invalid", "no usable registered public key: " + "; ".join(problems))
        return fail("invalid", "no registered public key to verify this key-signed bundle with")
    # The hint is unauthenticated: it only orders the attempts.
    hinted = _hint_fingerprint(parsed.public_key_hint)
    keys.sort(key=lambda k: k.fingerprint != hinted)

    matched: _Key | None = None
    if parsed.content == "dsse":
        assert parsed.payload_type is not None
        assert parsed.payload is not None
        message = pae(parsed.payload_type, parsed.payload)
        for key in keys:
            if any(_verify_with(key.key, s.sig, message) for s in parsed.signatures):
                matched = key
                break
        if matched is None:
            return fail("invalid", "signature does not verify with any registered key")
        if digest is not None:
            reason = _subject_check(parsed.payload_type, parsed.payload, digest)
            if reason is not None:
                return fail("invalid", reason)
    else:
        if digest is None:
            return fail(
                "unsupported",
                "a message signature can only be verified against the signed artifact "
                "(none was given)",
            )
        if parsed.message_digest is not None:
            if (parsed.message_digest_algorithm or "").upper() not in ("SHA2_256", "SHA256"):
                return fail(
                    "unsupported",
                    f"message digest algorithm {parsed.message_digest_algorithm!r} "
                    "is not supported",
                )
            if parsed.message_digest.hex() != digest:
                return fail("invalid", "bundle messageDigest does not match the artifact")
        assert parsed.message_signature is not None
        for key in keys:
            if isinstance(key.key, ed25519.Ed25519PublicKey):
                if artifact is None:
                    continue
                ok = _verify_with(key.key, parsed.message_signature, artifact)
            else:
                ok = _verify_with(
                    key.key, parsed.message_signature, bytes.fromhex(digest), prehashed=True
                )
            if ok:
                matched = key
                break
        if matched is None:
            return fail("invalid", "signature does not verify with any registered key")

    signer = SignerClaims(
        mode="key",
        key_fingerprint=matched.fingerprint,
        key_id=matched.key_id,
        key_index=matched.index,
    )
    what = "DSSE" if parsed.content == "dsse" else "message signature"
    return SignatureOutcome(
        status="ok",
        detail=_one_line(
            f"key-signed {what} verified with registered key {matched.key_id} "
            f"(sha256 {matched.fingerprint[:16]}…); transparency log entries not checked"
        ),
        mode="key",
        content=parsed.content,
        payload_type=parsed.payload_type,
        payload=parsed.payload,
        signer=signer,
        bundle_sha256=parsed.sha256,
        media_type=parsed.media_type,
        has_tlog_entry=bool(parsed.tlog_entries),
    )


def verify_keyed(
    bundle_bytes: bytes | str | ParsedBundle,
    *,
    public_keys: Sequence[bytes | str] | Mapping[str, bytes | str],
    artifact: bytes | None = None,
    artifact_sha256: str | None = None,
) -> SignatureOutcome:
    """Verify a key-signed bundle (or bare DSSE envelope) against registered PEM public keys.

    ECDSA P-256 (SHA-256) and Ed25519; any one valid signature with any one registered key
    passes, and the outcome names that key (``key_id`` = mapping key or list index) and its
    fingerprint (sha256 of the DER SPKI). The ``publicKey.hint`` is unauthenticated and only
    orders the attempts. Transparency-log entries and TSA tokens are ignored: trust is the key.
    """
    digest = _artifact_digest(artifact, artifact_sha256)
    parsed = _parse(bundle_bytes)
    if isinstance(parsed, SignatureOutcome):
        return parsed
    return _verify_keyed_parsed(parsed, public_keys=public_keys, artifact=artifact, digest=digest)


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
    digest = _artifact_digest(artifact, artifact_sha256)
    parsed = _parse(bundle_bytes)
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
    return _verify_keyed_parsed(parsed, public_keys=public_keys, artifact=artifact, digest=digest)
