"""Registered public keys: key-signed evidence counts only with an active one.

Only ECDSA P-256 and Ed25519 keys are accepted (what the verifier checks). The fingerprint is
the sha256 of the DER SubjectPublicKeyInfo — the same value a cosign bundle's
``publicKey.hint`` encodes — so a key pasted in any PEM layout is recognised once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from evidence_app.consensus import stored
from evidence_app.models import Signer, SignerClass, SignerClassChange, SigningKey
from evidence_app.verification.certificate import public_key_fingerprint

MAX_PEM_CHARS = 4096
ECDSA_P256 = "ecdsa-p256"
ED25519 = "ed25519"


@dataclass(frozen=True)
class KeyInfo:
    pem: str  # normalised SubjectPublicKeyInfo PEM
    fingerprint: str
    algorithm: str


def public_key_inspect(pem: str | bytes) -> KeyInfo:
    """Load a PEM public key; ``ValidationError`` unless it is ECDSA P-256 or Ed25519."""
    text = pem.decode("ascii", "replace") if isinstance(pem, bytes) else str(pem)
    text = text.strip()
    if not text:
        raise ValidationError("Paste a PEM public key.", code="empty")
    if len(text) > MAX_PEM_CHARS:
        raise ValidationError("That is too long for a public key.", code="too_long")
    if "PRIVATE KEY" in text:
        raise ValidationError(
            "That is a private key. Paste the PUBLIC key only (and treat the private key as "
            "leaked).",
            code="private_key",
        )
    try:
        key = serialization.load_pem_public_key(text.encode("ascii", "replace"))
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise ValidationError(
            f"Not a PEM public key ({exc}).".replace("..", "."), code="invalid"
        ) from None
    if isinstance(key, ed25519.Ed25519PublicKey):
        algorithm = ED25519
    elif isinstance(key, ec.EllipticCurvePublicKey) and isinstance(key.curve, ec.SECP256R1):
        algorithm = ECDSA_P256
    else:
        raise ValidationError(
            "Only ECDSA P-256 and Ed25519 keys are accepted.", code="unsupported_key"
        )
    normal = key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()
    return KeyInfo(pem=normal, fingerprint=public_key_fingerprint(key), algorithm=algorithm)


def signing_key_check(public_key_pem: str | bytes, *, exclude_pk: int | None = None) -> KeyInfo:
    """``public_key_inspect`` plus: not registered already (``ValidationError`` otherwise)."""
    info = public_key_inspect(public_key_pem)
    duplicate = SigningKey.objects.filter(fingerprint=info.fingerprint)
    if exclude_pk is not None:
        duplicate = duplicate.exclude(pk=exclude_pk)
    if duplicate.exists():
        raise ValidationError(
            f"This key is already registered (sha256 {info.fingerprint[:16]}…).",
            code="duplicate",
        )
    return info


def signing_key_register(
    *,
    name: str,
    public_key_pem: str | bytes,
    by: Any = None,
    is_demo: bool = False,
) -> SigningKey:
    """Register a public key (fingerprint and algorithm computed)."""
    info = signing_key_check(public_key_pem)
    key = SigningKey(
        name=name,
        public_key_pem=info.pem,
        fingerprint=info.fingerprint,
        algorithm=info.algorithm,
        is_demo=is_demo,
        registered_by=by,
    )
    key.full_clean()
    key.save()
    return key


@transaction.atomic
def signing_key_revoke(*, key: SigningKey, by: Any = None) -> SigningKey:
    """Revoke a key: its evidence stops counting (its signer becomes *reported*, with history)."""
    # Lock the key row: two maintainers revoking at once must write one history entry.
    key = SigningKey.objects.select_for_update().get(pk=key.pk)
    if key.revoked_at is not None:
        return key
    key.revoked_at = timezone.now()
    key.save(update_fields=["revoked_at"])
    revoked: list[int] = []
    for signer in Signer.objects.select_for_update(no_key=True).filter(key=key):
        SignerClassChange.objects.create(
            signer=signer,
            from_class=signer.signer_class,
            to_class=SignerClass.REPORTED,
            from_counted=signer.counted,
            to_counted=False,
            reason=f"registered key {key.name!r} revoked" + (f" by {by}" if by else ""),
        )
        signer.signer_class = SignerClass.REPORTED
        signer.counted = False
        signer.save(update_fields=["signer_class", "counted"])
        revoked.append(signer.pk)
    stored.signers_changed(revoked)
    return key


def active_public_keys() -> dict[str, str]:
    """``{key id: PEM}`` of the active registered keys, for the verifier."""
    return {
        str(pk): pem for pk, pem in SigningKey.objects.active().values_list("pk", "public_key_pem")
    }
