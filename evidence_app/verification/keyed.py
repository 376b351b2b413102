"""Key-signed verification: DSSE envelopes and message signatures checked with ``cryptography``
against the public keys a maintainer registered (ECDSA P-256 with SHA-256, Ed25519). Trust is
the key: transparency-log entries and TSA tokens are not checked."""

from __future__ import annotations

import base64
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed

from .bundle import ParsedBundle
from .certificate import public_key_fingerprint
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

_NO_KEY_VERIFIES = "signature does not verify with any registered key"


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
        return f"cannot load public key ({one_line(str(exc))[:80]})"
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


def verify_keyed_parsed(
    parsed: ParsedBundle,
    *,
    public_keys: Sequence[bytes | str] | Mapping[str, bytes | str],
    artifact: bytes | None,
    digest: str | None,
) -> SignatureOutcome:
    def fail(status: Status, detail: str) -> SignatureOutcome:
        return failure(status, detail, parsed=parsed, mode="key")

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
    if parsed.content == "dsse":
        matched = _keyed_dsse(parsed, keys, digest)
    else:
        matched = _keyed_message(parsed, keys, artifact=artifact, digest=digest)
    if isinstance(matched, SignatureOutcome):
        return matched
    what = "DSSE" if parsed.content == "dsse" else "message signature"
    return SignatureOutcome(
        status="ok",
        detail=one_line(
            f"key-signed {what} verified with registered key {matched.key_id} "
            f"(sha256 {matched.fingerprint[:16]}…); transparency log entries not checked"
        ),
        mode="key",
        content=parsed.content,
        payload_type=parsed.payload_type,
        payload=parsed.payload,
        signer=SignerClaims(
            mode="key",
            key_fingerprint=matched.fingerprint,
            key_id=matched.key_id,
            key_index=matched.index,
        ),
        bundle_sha256=parsed.sha256,
        media_type=parsed.media_type,
        has_tlog_entry=bool(parsed.tlog_entries),
    )


def _keyed_dsse(
    parsed: ParsedBundle, keys: list[_Key], digest: str | None
) -> _Key | SignatureOutcome:
    """The registered key one of the envelope's signatures verifies with (over the PAE), and
    the artifact among the statement's subjects when one is given."""
    assert parsed.payload_type is not None
    assert parsed.payload is not None
    message = pae(parsed.payload_type, parsed.payload)
    matched = next(
        (k for k in keys if any(_verify_with(k.key, s.sig, message) for s in parsed.signatures)),
        None,
    )
    if matched is None:
        return failure("invalid", _NO_KEY_VERIFIES, parsed=parsed, mode="key")
    if digest is not None:
        reason = subject_mismatch(parsed.payload_type, parsed.payload, digest)
        if reason is not None:
            return failure("invalid", reason, parsed=parsed, mode="key")
    return matched


def _keyed_message(
    parsed: ParsedBundle, keys: list[_Key], *, artifact: bytes | None, digest: str | None
) -> _Key | SignatureOutcome:
    """The registered key the message signature verifies with: Ed25519 over the artifact's
    bytes, ECDSA over its sha256 (the bundle's own ``messageDigest`` must agree)."""

    def fail(status: Status, detail: str) -> SignatureOutcome:
        return failure(status, detail, parsed=parsed, mode="key")

    if digest is None:
        return fail(
            "unsupported",
            "a message signature can only be verified against the signed artifact (none was given)",
        )
    if parsed.message_digest is not None:
        if (parsed.message_digest_algorithm or "").upper() not in ("SHA2_256", "SHA256"):
            return fail(
                "unsupported",
                f"message digest algorithm {parsed.message_digest_algorithm!r} is not supported",
            )
        if parsed.message_digest.hex() != digest:
            return fail("invalid", "bundle messageDigest does not match the artifact")
    signature = parsed.message_signature
    assert signature is not None
    for key in keys:
        if isinstance(key.key, ed25519.Ed25519PublicKey):
            if artifact is None:
                continue
            ok = _verify_with(key.key, signature, artifact)
        else:
            ok = _verify_with(key.key, signature, bytes.fromhex(digest), prehashed=True)
        if ok:
            return key
    return fail("invalid", _NO_KEY_VERIFIES)


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
    digest = artifact_digest(artifact, artifact_sha256)
    parsed = parsed_or_failure(bundle_bytes)
    if isinstance(parsed, SignatureOutcome):
        return parsed
    return verify_keyed_parsed(parsed, public_keys=public_keys, artifact=artifact, digest=digest)
