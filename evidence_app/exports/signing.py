"""Signing the audit package's manifest with the site's key, and checking such a signature.

The key is the site's one signing key (``evidence_app.services.site_key``: ``SITE_SIGNING_KEY``,
or in development a key generated once into ``SITE_SIGNING_LOCAL_KEY_FILE``), the same key that
signs the evidence of validation runs. The signature is ECDSA with SHA-256 over the manifest's
bytes, DER, base64-encoded: what ``cosign verify-blob --key`` and ``openssl dgst -sha256
-verify`` check.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, utils

from evidence_app.services.site_key import site_private_key
from evidence_app.verification.certificate import public_key_fingerprint


def configured_public_key() -> ec.EllipticCurvePublicKey | None:
    """The site key's public half if one is configured or was generated; never generates one
    (a checker must not trust a key it just made up)."""
    from django.conf import settings

    local = getattr(settings, "SITE_SIGNING_LOCAL_KEY_FILE", None)
    configured = (getattr(settings, "SITE_SIGNING_KEY", "") or "").strip()
    if not configured and not (local is not None and Path(local).exists()):
        return None
    return site_private_key().public_key()


def public_pem(key: ec.EllipticCurvePrivateKey | ec.EllipticCurvePublicKey) -> str:
    public = key.public_key() if isinstance(key, ec.EllipticCurvePrivateKey) else key
    return public.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode("ascii")


def sign_manifest(data: bytes, key: ec.EllipticCurvePrivateKey | None = None) -> tuple[bytes, str]:
    """``(base64 signature + newline, public key PEM)`` over ``data`` with the site key (or
    ``key``)."""
    return sign_manifest_digest(hashlib.sha256(data).digest(), key)


def sign_manifest_digest(
    digest: bytes, key: ec.EllipticCurvePrivateKey | None = None
) -> tuple[bytes, str]:
    """The same signature from the manifest's sha256 alone (the same ECDSA/SHA-256 over the
    bytes, hashed as they were written): a large package's manifest is never held whole."""
    key = key or site_private_key()
    signature = key.sign(digest, ec.ECDSA(utils.Prehashed(hashes.SHA256())))
    return base64.b64encode(signature) + b"\n", public_pem(key)


def load_public_key(pem: bytes | str) -> ec.EllipticCurvePublicKey:
    """A P-256 public key from PEM; ``ValueError`` naming what is wrong otherwise."""
    try:
        key = serialization.load_pem_public_key(pem.encode() if isinstance(pem, str) else pem)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"not a PEM public key ({exc})") from None
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
        raise ValueError("not an ECDSA P-256 public key")
    return key


def manifest_signature_ok(
    data: bytes, signature_b64: bytes, key: ec.EllipticCurvePublicKey
) -> bool:
    try:
        signature = base64.b64decode(signature_b64.strip(), validate=True)
        key.verify(signature, data, ec.ECDSA(hashes.SHA256()))
    except (InvalidSignature, binascii.Error, ValueError):
        return False
    return True


def key_fingerprint(key: ec.EllipticCurvePublicKey) -> str:
    """sha256 of the DER SubjectPublicKeyInfo (as for registered keys)."""
    return public_key_fingerprint(key)
