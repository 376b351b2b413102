"""The site's own signing key: validation runs become key-signed evidence with it.

An ECDSA P-256 private key, PEM, from the environment (``SITE_SIGNING_KEY``). In development
(``DEBUG`` and no ``SITE_SIGNING_KEY``) ``manage.py ensure_site_key`` generates one into the
git-ignored ``SITE_SIGNING_LOCAL_KEY_FILE`` (the first publish does too, if nobody ran it). Its
public half is registered as a ``SigningKey`` the first time a run is published, so the ingest
verifies run evidence like any other key-signed upload, and a maintainer can revoke it like any
other key (then runs stop publishing until a new key is configured: a revoked key is never
registered again).

Key-signed evidence is shown as such: it can count on this site because the key is registered,
but AICR's upstream evidence gate accepts keyless (Fulcio certificate) signatures only.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from evidence_app.models import SigningKey
from evidence_app.services import keys
from evidence_app.verification.certificate import public_key_fingerprint

KEY_NAME = "This site's validation runs (site key)"


class SiteKeyUnavailable(RuntimeError):
    """No usable site key: not configured, unreadable, not P-256, or revoked."""


def generate_pem() -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def ensure_local_site_key(path: Path) -> bool:
    """Create a private key file at ``path`` (mode 0600) unless one exists; True if created.

    Several processes (web, worker) may race at start-up: the file is linked into place
    atomically, so exactly one key wins and nobody reads a half-written file.
    """
    if path.exists():
        return False
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=".site-key-")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(generate_pem())
        try:
            os.link(temporary, path)
        except FileExistsError:
            return False
        return True
    finally:
        os.unlink(temporary)


def _configured_pem() -> bytes:
    pem = (getattr(settings, "SITE_SIGNING_KEY", "") or "").strip()
    if pem:
        return pem.encode()
    local = getattr(settings, "SITE_SIGNING_LOCAL_KEY_FILE", None)
    if local is not None:
        # Development only (the setting is None unless DEBUG and no SITE_SIGNING_KEY), like
        # the kubeconfig key: a worker started without `ensure_site_key` still has a key.
        ensure_local_site_key(Path(local))
        return Path(local).read_bytes()
    raise SiteKeyUnavailable(
        "no site signing key: set SITE_SIGNING_KEY to the PEM of an ECDSA P-256 private key "
        "(`manage.py ensure_site_key --print` makes one); in development run "
        "`manage.py ensure_site_key`"
    )


def site_private_key() -> ec.EllipticCurvePrivateKey:
    try:
        key = serialization.load_pem_private_key(_configured_pem(), password=None)
    except (ValueError, TypeError) as exc:
        # The message never includes the key material.
        raise SiteKeyUnavailable(
            f"the site signing key is not an unencrypted PEM private key ({type(exc).__name__})"
        ) from None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or not isinstance(key.curve, ec.SECP256R1):
        raise SiteKeyUnavailable("the site signing key must be an ECDSA P-256 private key")
    return key


def site_signing_key_ensure(key: ec.EllipticCurvePrivateKey) -> SigningKey:
    """The registered ``SigningKey`` of ``key``'s public half, registered now if it is new."""
    fingerprint = public_key_fingerprint(key.public_key())
    existing = SigningKey.objects.filter(fingerprint=fingerprint).first()
    if existing is None:
        pem = key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        try:
            # Two workers publishing their first run at once: the unique fingerprint lets one
            # registration in; the other reads it.
            with transaction.atomic():
                return keys.signing_key_register(name=KEY_NAME, public_key_pem=pem)
        except (IntegrityError, ValidationError):
            existing = SigningKey.objects.filter(fingerprint=fingerprint).first()
            if existing is None:
                raise
    assert existing is not None
    if existing.revoked_at is not None:
        raise SiteKeyUnavailable(
            f"the site signing key ({fingerprint[:16]}…) was revoked on "
            f"{existing.revoked_at:%Y-%m-%d}; configure a new SITE_SIGNING_KEY"
        )
    return existing
