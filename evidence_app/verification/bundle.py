"""Parse a Sigstore bundle (v0.1-v0.3) from untrusted bytes, with limits and clear errors.

This is a structural parse only: nothing here is verified. It tells the signature step what kind
of bundle it has (keyless certificate vs. public-key hint, DSSE vs. message signature, which
transparency-log entry kinds) so formats no verifier here can check are reported as
*unsupported* rather than *invalid*.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from ._json import JSONLimitError, JSONLimits, load_json

MAX_BUNDLE_BYTES = 1_000_000
"""Real bundles are 2-20 KB; anything over 1 MB is refused before decoding."""

BUNDLE_LIMITS = JSONLimits(
    max_bytes=MAX_BUNDLE_BYTES, max_depth=64, max_object_keys=256, max_values=20_000
)

IN_TOTO_PAYLOAD_TYPE = "application/vnd.in-toto+json"

MEDIA_TYPES: dict[str, str] = {
    "application/vnd.dev.sigstore.bundle+json;version=0.1": "0.1",
    "application/vnd.dev.sigstore.bundle+json;version=0.2": "0.2",
    "application/vnd.dev.sigstore.bundle+json;version=0.3": "0.3",
    "application/vnd.dev.sigstore.bundle.v0.3+json": "0.3",
}
_SIGSTORE_PREFIX = "application/vnd.dev.sigstore.bundle"
_MAX_TEXT = 4096
_MAX_TLOG_ENTRIES = 8
_MAX_SIGNATURES = 8
_MAX_CHAIN = 8
_MAX_TIMESTAMPS = 32

Content = Literal["dsse", "message_signature"]
Material = Literal["certificate", "x509_chain", "public_key", "none"]


class BundleError(ValueError):
    """The bytes are not a bundle this package can read.

    ``unsupported`` is true when the document is recognisably a signature format (a future bundle
    version, a legacy cosign bundle) that the verifiers here cannot check; false when it is
    simply malformed.
    """

    def __init__(self, message: str, *, unsupported: bool = False) -> None:
        super().__init__(message)
        self.unsupported = unsupported


@dataclass(frozen=True)
class DsseSignature:
    sig: bytes
    keyid: str | None


@dataclass(frozen=True)
class TlogEntryInfo:
    kind: str
    version: str
    log_index: int | None
    log_id: bytes | None
    integrated_time: int | None
    has_inclusion_promise: bool
    has_inclusion_proof: bool

    @property
    def kind_version(self) -> str:
        return f"{self.kind}/{self.version}"


@dataclass(frozen=True)
class ParsedBundle:
    """What a bundle claims to contain (unverified)."""

    raw: bytes
    sha256: str
    media_type: str | None
    version: str | None
    content: Content
    material: Material
    certificate_der: bytes | None = None
    public_key_hint: str | None = None
    payload_type: str | None = None
    payload: bytes | None = None
    signatures: tuple[DsseSignature, ...] = ()
    message_signature: bytes | None = None
    message_digest_algorithm: str | None = None
    message_digest: bytes | None = None
    tlog_entries: tuple[TlogEntryInfo, ...] = ()
    rfc3161_timestamps: int = 0
    document: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def has_certificate(self) -> bool:
        return self.material in ("certificate", "x509_chain")

    @property
    def is_bare_envelope(self) -> bool:
        return self.media_type is None


def _b64(value: Any, where: str) -> bytes:
    if not isinstance(value, str):
        raise BundleError(f"{where}: expected a base64 string, got {type(value).__name__}")
    text = value.strip()
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        pass
    # protobuf JSON also allows URL-safe and unpadded base64
    if re.fullmatch(r"[A-Za-z0-9_\-+/]*={0,2}", text):
        try:
            padded = text.rstrip("=") + "=" * (-len(text.rstrip("=")) % 4)
            return base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
        except (binascii.Error, ValueError):
            pass
    raise BundleError(f"{where}: not valid base64")


def _obj(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BundleError(f"{where}: expected an object")
    return value


def _opt_obj(value: Any, where: str) -> dict[str, Any] | None:
    return None if value is None else _obj(value, where)


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise BundleError(f"{where}: expected a string")
    if len(value) > _MAX_TEXT:
        raise BundleError(f"{where}: longer than {_MAX_TEXT} characters")
    return value


def _opt_text(value: Any, where: str) -> str | None:
    return None if value is None else _text(value, where)


def _uint(value: Any, where: str) -> int | None:
    """protobuf JSON uint64/int64: a decimal string (numbers tolerated here, sigstore decides)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise BundleError(f"{where}: expected an integer string")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?\d{1,20}", value):
        return int(value)
    raise BundleError(f"{where}: expected an integer string")


def _list(value: Any, where: str, *, limit: int) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise BundleError(f"{where}: expected a list")
    if len(value) > limit:
        raise BundleError(f"{where}: more than {limit} items")
    return value


def _parse_envelope(
    env: dict[str, Any], where: str
) -> tuple[str, bytes, tuple[DsseSignature, ...]]:
    payload_type = _text(env.get("payloadType"), f"{where}.payloadType")
    payload = _b64(env.get("payload"), f"{where}.payload")
    sigs: list[DsseSignature] = []
    for i, item in enumerate(
        _list(env.get("signatures"), f"{where}.signatures", limit=_MAX_SIGNATURES)
    ):
        item_obj = _obj(item, f"{where}.signatures[{i}]")
        sig = _b64(item_obj.get("sig"), f"{where}.signatures[{i}].sig")
        keyid = _opt_text(item_obj.get("keyid"), f"{where}.signatures[{i}].keyid")
        sigs.append(DsseSignature(sig=sig, keyid=keyid or None))
    if not sigs:
        raise BundleError(f"{where}.signatures: the envelope has no signatures")
    return payload_type, payload, tuple(sigs)


def parse_bundle(data: bytes | str, *, max_bytes: int = MAX_BUNDLE_BYTES) -> ParsedBundle:
    """Parse ``data`` as a Sigstore bundle (or a bare DSSE envelope) and return its parts.

    Raises ``BundleError`` naming the offending field. Nothing is verified.
    """
    raw, doc = _load_document(data, max_bytes=max_bytes)
    digest = hashlib.sha256(raw).hexdigest()
    media_type = doc.get("mediaType")
    if media_type is None:
        return _bare_envelope(raw, digest, doc)
    version = _bundle_version(media_type)
    vm = _obj(doc.get("verificationMaterial"), "bundle.verificationMaterial")
    material, certificate_der, hint = _signing_material(vm)
    entries = _tlog_entries(vm)
    timestamps = _timestamp_count(vm)

    has_dsse = doc.get("dsseEnvelope") is not None
    has_msg = doc.get("messageSignature") is not None
    if has_dsse == has_msg:
        raise BundleError(
            "bundle: expected exactly one of dsseEnvelope or messageSignature"
            if has_dsse
            else "bundle: no dsseEnvelope or messageSignature (nothing is signed)"
        )
    common: dict[str, Any] = {
        "raw": raw,
        "sha256": digest,
        "media_type": media_type,
        "version": version,
        "material": material,
        "certificate_der": certificate_der,
        "public_key_hint": hint,
        "tlog_entries": entries,
        "rfc3161_timestamps": timestamps,
        "document": doc,
    }
    if has_dsse:
        env = _obj(doc["dsseEnvelope"], "bundle.dsseEnvelope")
        payload_type, payload, sigs = _parse_envelope(env, "dsseEnvelope")
        return ParsedBundle(
            content="dsse", payload_type=payload_type, payload=payload, signatures=sigs, **common
        )
    return _message_signature(doc, common)


def _load_document(data: bytes | str, *, max_bytes: int) -> tuple[bytes, dict[str, Any]]:
    """The bytes and their JSON object, read under the size, depth and key limits."""
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    if len(raw) > max_bytes:
        raise BundleError(f"bundle: {len(raw)} bytes exceeds the limit of {max_bytes}")
    if not raw.strip():
        raise BundleError("bundle: empty document")
    limits = (
        BUNDLE_LIMITS
        if max_bytes == MAX_BUNDLE_BYTES
        else JSONLimits(max_bytes=max_bytes, max_depth=64, max_object_keys=256, max_values=20_000)
    )
    try:
        doc = load_json(raw, what="bundle", limits=limits)
    except JSONLimitError as exc:
        raise BundleError(str(exc)) from None
    if not isinstance(doc, dict):
        raise BundleError("bundle: the document is not a JSON object")
    return raw, doc


def _bare_envelope(raw: bytes, digest: str, doc: dict[str, Any]) -> ParsedBundle:
    """A document without ``mediaType``: a bare DSSE envelope, or refused (a legacy cosign
    bundle is named as such)."""
    if {"payload", "payloadType", "signatures"} <= doc.keys():
        payload_type, payload, sigs = _parse_envelope(doc, "envelope")
        return ParsedBundle(
            raw=raw,
            sha256=digest,
            media_type=None,
            version=None,
            content="dsse",
            material="none",
            payload_type=payload_type,
            payload=payload,
            signatures=sigs,
            document=doc,
        )
    if {"base64Signature"} <= doc.keys() or "rekorBundle" in doc:
        raise BundleError(
            "legacy cosign bundle (base64Signature/cert/rekorBundle) is not a Sigstore bundle; "
            "re-sign with cosign >= 3 or --new-bundle-format",
            unsupported=True,
        )
    raise BundleError("bundle.mediaType: missing (not a Sigstore bundle)")


def _bundle_version(media_type: Any) -> str:
    if not isinstance(media_type, str):
        raise BundleError("bundle.mediaType: expected a string")
    version = MEDIA_TYPES.get(media_type)
    if version is not None:
        return version
    if media_type.startswith(_SIGSTORE_PREFIX):
        raise BundleError(
            f"bundle.mediaType: {media_type[:120]!r} is not a supported bundle version (v0.1-v0.3)",
            unsupported=True,
        )
    raise BundleError(f"bundle.mediaType: {media_type[:120]!r} is not a Sigstore bundle media type")


def _signing_material(vm: dict[str, Any]) -> tuple[Material, bytes | None, str | None]:
    """What signed: a certificate (or a chain's leaf) in DER, or a public key's hint."""
    if vm.get("certificate") is not None:
        cert = _obj(vm["certificate"], "verificationMaterial.certificate")
        der = _b64(cert.get("rawBytes"), "verificationMaterial.certificate.rawBytes")
        return "certificate", der, None
    if vm.get("x509CertificateChain") is not None:
        chain = _obj(vm["x509CertificateChain"], "verificationMaterial.x509CertificateChain")
        certs = _list(
            chain.get("certificates"),
            "verificationMaterial.x509CertificateChain.certificates",
            limit=_MAX_CHAIN,
        )
        if not certs:
            raise BundleError("verificationMaterial.x509CertificateChain: empty certificate chain")
        first = _obj(certs[0], "verificationMaterial.x509CertificateChain.certificates[0]")
        der = _b64(
            first.get("rawBytes"), "verificationMaterial.x509CertificateChain.certificates[0]"
        )
        return "x509_chain", der, None
    if vm.get("publicKey") is not None:
        pk = _obj(vm["publicKey"], "verificationMaterial.publicKey")
        return "public_key", None, _opt_text(pk.get("hint"), "verificationMaterial.publicKey.hint")
    raise BundleError("verificationMaterial: no certificate, x509CertificateChain or publicKey")


def _tlog_entries(vm: dict[str, Any]) -> tuple[TlogEntryInfo, ...]:
    entries: list[TlogEntryInfo] = []
    for i, entry in enumerate(
        _list(vm.get("tlogEntries"), "verificationMaterial.tlogEntries", limit=_MAX_TLOG_ENTRIES)
    ):
        where = f"verificationMaterial.tlogEntries[{i}]"
        entry_obj = _obj(entry, where)
        kv = _obj(entry_obj.get("kindVersion"), f"{where}.kindVersion")
        log_id_obj = _opt_obj(entry_obj.get("logId"), f"{where}.logId")
        log_id = None
        if log_id_obj is not None and log_id_obj.get("keyId") is not None:
            log_id = _b64(log_id_obj.get("keyId"), f"{where}.logId.keyId")
        entries.append(
            TlogEntryInfo(
                kind=_text(kv.get("kind"), f"{where}.kindVersion.kind"),
                version=_text(kv.get("version"), f"{where}.kindVersion.version"),
                log_index=_uint(entry_obj.get("logIndex"), f"{where}.logIndex"),
                log_id=log_id,
                integrated_time=_uint(entry_obj.get("integratedTime"), f"{where}.integratedTime"),
                has_inclusion_promise=entry_obj.get("inclusionPromise") is not None,
                has_inclusion_proof=entry_obj.get("inclusionProof") is not None,
            )
        )
    return tuple(entries)


def _timestamp_count(vm: dict[str, Any]) -> int:
    tsv = _opt_obj(
        vm.get("timestampVerificationData"), "verificationMaterial.timestampVerificationData"
    )
    if tsv is None:
        return 0
    return len(
        _list(
            tsv.get("rfc3161Timestamps"),
            "verificationMaterial.timestampVerificationData.rfc3161Timestamps",
            limit=_MAX_TIMESTAMPS,
        )
    )


def _message_signature(doc: dict[str, Any], common: dict[str, Any]) -> ParsedBundle:
    msg = _obj(doc["messageSignature"], "bundle.messageSignature")
    signature = _b64(msg.get("signature"), "messageSignature.signature")
    algorithm = None
    digest_bytes = None
    md = _opt_obj(msg.get("messageDigest"), "messageSignature.messageDigest")
    if md is not None:
        algorithm = _text(md.get("algorithm"), "messageSignature.messageDigest.algorithm")
        digest_bytes = _b64(md.get("digest"), "messageSignature.messageDigest.digest")
    return ParsedBundle(
        content="message_signature",
        message_signature=signature,
        message_digest_algorithm=algorithm,
        message_digest=digest_bytes,
        **common,
    )
