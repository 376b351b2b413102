"""Signing the audit package's manifest with the site's key, and checking such a signature.

The key is an ECDSA P-256 private key in PEM: ``settings.SITE_SIGNING_KEY``, or the
``SITE_SIGNING_KEY`` environment variable when settings do not define it, else, in development
only (``DEBUG``), a key generated once into the git-ignored
``SITE_SIGNING_LOCAL_KEY_FILE`` (default ``.run/site-signing-key.pem``). The signature is ECDSA
with SHA-256 over the manifest's bytes, DER, base64-encoded: what ``cosign verify-blob --key``
and ``openssl dgst -sha256 -verify`` check.

LEAD: branch ``validate`` adds the same key for validation runs
(``validators_app/services/site_key.py``: ``SITE_SIGNING_KEY`` / ``ensure_site_key``, same PEM
format). After both are merged, ``_private_pem`` should call that module so there is one key
loader; ``sign_manifest``'s contract stays.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import tempfile
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from evidence_app.verification.certificate import public_key_fingerprint


class SiteKeyUnavailable(RuntimeError):
    """No usable site key (not configured, unreadable, or not ECDSA P-256)."""


def _local_key_file() -> Path | None:
    from django.conf import settings

    configured = getattr(settings, "SITE_SIGNING_LOCAL_KEY_FILE", None)
    if configured:
        return Path(configured)
    if settings.DEBUG:
        return Path(settings.BASE_DIR) / ".run" / "site-signing-key.pem"
    return None


def _generate_file(path: Path) -> None:
    """Create the development key at ``path`` (0600) unless it exists; linked into place
    atomically, so two processes starting together agree on one key."""
    if path.exists():
        return
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=".site-key-")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(pem)
        with contextlib.suppress(FileExistsError):  # another process won: its key stands
            os.link(temporary, path)
    finally:
        os.unlink(temporary)


def _configured_pem() -> str:
    """``settings.SITE_SIGNING_KEY`` when settings define it, else the environment's."""
    from django.conf import settings

    configured = getattr(settings, "SITE_SIGNING_KEY", None)
    if configured is None:
        configured = os.environ.get("SITE_SIGNING_KEY", "")
    return (configured or "").strip()


def _private_pem() -> bytes:
    pem = _configured_pem()
    if pem:
        return pem.encode()
    local = _local_key_file()
    if local is None:
        raise SiteKeyUnavailable(
            "no site signing key: set SITE_SIGNING_KEY to the PEM of an ECDSA P-256 private key"
        )
    _generate_file(local)
    return local.read_bytes()


def site_private_key() -> ec.EllipticCurvePrivateKey:
    try:
        key = serialization.load_pem_private_key(_private_pem(), password=None)
    except (ValueError, TypeError, OSError) as exc:
        raise SiteKeyUnavailable(f"the site signing key cannot be read: {exc}") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
        raise SiteKeyUnavailable("the site signing key must be ECDSA P-256")
    return key


def configured_public_key() -> ec.EllipticCurvePublicKey | None:
    """The site key's public half if one is configured or was generated; never generates one
    (a checker must not trust a key it just made up)."""
    local = _local_key_file()
    if not _configured_pem() and not (local is not None and local.exists()):
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
    key = key or site_private_key()
    signature = key.sign(data, ec.ECDSA(hashes.SHA256()))
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
