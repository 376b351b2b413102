"""Read identity claims from a Fulcio-style signing certificate.

These readers do **not** verify anything. ``signature.verify_keyless`` uses them twice: before
verification, to learn which exact (identity, issuer) to pin in the sigstore policy, and after
verification, to report the claims of the certificate that sigstore just verified.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from cryptography import x509
from cryptography.hazmat.primitives import serialization

FULCIO_OID_PREFIX = "1.3.6.1.4.1.57264.1."
SIGSTORE_OTHERNAME_OID = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.7")
MAX_CLAIM_CHARS = 4096

# Fulcio extension 1.3.6.1.4.1.57264.1.N -> claim name. N 1-6: raw UTF-8 bytes (deprecated
# forms); N >= 8: DER UTF8String.
FULCIO_EXTENSIONS: dict[int, str] = {
    1: "issuer_v1",
    2: "github_workflow_trigger",
    3: "github_workflow_sha",
    4: "github_workflow_name",
    5: "github_workflow_repository",
    6: "github_workflow_ref",
    8: "issuer",
    9: "build_signer_uri",
    10: "build_signer_digest",
    11: "runner_environment",
    12: "source_repository_uri",
    13: "source_repository_digest",
    14: "source_repository_ref",
    15: "source_repository_identifier",
    16: "source_repository_owner_uri",
    17: "source_repository_owner_identifier",
    18: "build_config_uri",
    19: "build_config_digest",
    20: "build_trigger",
    21: "run_invocation_uri",
    22: "source_repository_visibility_at_signing",
}


class CertificateClaimError(ValueError):
    """The certificate cannot be read or lacks a usable identity."""


def load_certificate(der: bytes) -> x509.Certificate:
    try:
        return x509.load_der_x509_certificate(der)
    except ValueError as exc:
        raise CertificateClaimError(f"signing certificate is not valid DER ({exc})") from None


def _der_utf8string(value: bytes) -> str | None:
    """Decode a DER UTF8String (tag 0x0c); None when it is not one."""
    if len(value) < 2 or value[0] != 0x0C:
        return None
    length = value[1]
    offset = 2
    if length & 0x80:
        n = length & 0x7F
        if n == 0 or n > 3 or len(value) < 2 + n:
            return None
        length = int.from_bytes(value[2 : 2 + n], "big")
        offset = 2 + n
    if offset + length != len(value):
        return None
    try:
        return value[offset:].decode("utf-8")
    except UnicodeDecodeError:
        return None


def _clean(text: str | None) -> str | None:
    if text is None or len(text) > MAX_CLAIM_CHARS:
        return None
    return text


def fulcio_claims(cert: x509.Certificate) -> dict[str, str]:
    """All Fulcio extensions present, by claim name (undecodable or oversized ones skipped)."""
    claims: dict[str, str] = {}
    for ext in cert.extensions:
        dotted = ext.oid.dotted_string
        if not dotted.startswith(FULCIO_OID_PREFIX):
            continue
        suffix = dotted[len(FULCIO_OID_PREFIX) :]
        if not suffix.isdigit():
            continue
        number = int(suffix)
        name = FULCIO_EXTENSIONS.get(number)
        if name is None or not isinstance(ext.value, x509.UnrecognizedExtension):
            continue
        raw = ext.value.value
        if number <= 6:
            try:
                decoded: str | None = raw.decode("utf-8")
            except UnicodeDecodeError:
                continue
        else:
            decoded = _der_utf8string(raw)
        text = _clean(decoded)
        if text is not None:
            claims[name] = text
    return claims


def certificate_identities(cert: x509.Certificate) -> list[str]:
    """SAN values sigstore's ``policy.Identity`` matches: email, URI, Sigstore otherName."""
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    values: list[str] = list(san.get_values_for_type(x509.RFC822Name))
    values.extend(san.get_values_for_type(x509.UniformResourceIdentifier))
    for other in san.get_values_for_type(x509.OtherName):
        if other.type_id == SIGSTORE_OTHERNAME_OID:
            try:
                values.append(other.value.decode())  # as sigstore's Identity policy reads it
            except UnicodeDecodeError:
                continue
    return values


def certificate_issuers(claims: Mapping[str, str]) -> list[str]:
    """Distinct OIDC issuer values the certificate carries (v1 raw, v2 DER)."""
    seen: list[str] = []
    for key in ("issuer_v1", "issuer"):
        value = claims.get(key)
        if value and value not in seen:
            seen.append(value)
    return seen


def certificate_sha256(cert: x509.Certificate) -> str:
    return hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest()


def public_key_fingerprint(key: object) -> str:
    """sha256 hex of the DER SubjectPublicKeyInfo (cosign/sigstore key hint digest)."""
    der = key.public_bytes(  # type: ignore[attr-defined]
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return hashlib.sha256(der).hexdigest()
