"""Registered public keys: key-signed evidence counts only with an active one.

Only ECDSA P-256 and Ed25519 keys are accepted (what the verifier checks). The fingerprint is
the sha256 of the DER SubjectPublicKeyInfo — the same value a cosign bundle's
``publicKey.hint`` encodes — so a key pasted in any PEM layout is recognised once.

``signing_key_register`` is the one way a key is registered: the admin, the API
(``POST /api/v1/keys/``) and ``manage.py register_key`` all call it. A key is registered once:
the same key again (same fingerprint, even in another PEM layout, even revoked) is refused with
``SigningKeyDuplicate`` naming the existing record (the admin shows it as a form error, the API
answers 409).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed448, ed25519, rsa, x448, x25519
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from evidence_app.consensus import stored
from evidence_app.models import Signer, SignerClass, SignerClassChange, SigningKey
from evidence_app.verification.certificate import public_key_fingerprint

MAX_PEM_CHARS = 4096
MAX_NAME_CHARS = SigningKey._meta.get_field("name").max_length or 200
ECDSA_P256 = "ecdsa-p256"
ED25519 = "ed25519"
# ``ValidationError.code``s that are about the name (the rest are about the key).
NAME_ERROR_CODES = frozenset({"name_empty", "name_too_long", "name_unstorable"})


class SigningKeyDuplicate(ValidationError):
    """The key is registered already: ``existing`` is that record (active or revoked)."""

    def __init__(self, existing: SigningKey) -> None:
        state = (
            f"revoked {existing.revoked_at:%Y-%m-%d}"
            if existing.revoked_at is not None
            else "active"
        )
        super().__init__(
            f"This key is already registered as {existing.name!r} (id {existing.pk}, {state}, "
            f"sha256 {existing.fingerprint[:16]}…).",
            code="duplicate",
        )
        self.existing = existing


@dataclass(frozen=True)
class KeyInfo:
    pem: str  # normalised SubjectPublicKeyInfo PEM
    fingerprint: str
    algorithm: str


def _algorithm_name(key: object) -> str:
    """What an unsupported key is, in words, for the refusal."""
    if isinstance(key, rsa.RSAPublicKey):
        return f"an RSA {key.key_size}-bit key"
    if isinstance(key, ec.EllipticCurvePublicKey):
        return f"an ECDSA key on curve {key.curve.name}"
    if isinstance(key, dsa.DSAPublicKey):
        return f"a DSA {key.key_size}-bit key"
    if isinstance(key, ed448.Ed448PublicKey):
        return "an Ed448 key"
    if isinstance(key, (x25519.X25519PublicKey, x448.X448PublicKey)):
        return "a key-agreement (X25519/X448) key, which cannot sign"
    return f"a {type(key).__name__}"


def _first_unstorable(text: str) -> int | None:
    """The index of a character the database cannot store or a PEM cannot hold (NUL, a lone
    surrogate, other control characters but line breaks and tabs), or None."""
    for index, char in enumerate(text):
        if char in "\n\r\t":
            continue
        if char == "\x00" or unicodedata.category(char) in ("Cc", "Cs"):
            return index
    return None


def public_key_inspect(pem: str | bytes) -> KeyInfo:
    """Load a PEM public key; ``ValidationError`` unless it is ECDSA P-256 or Ed25519, its
    message naming the problem (empty, too long, a private key or a certificate pasted, not
    PEM, unstorable characters, an unsupported algorithm named)."""
    if isinstance(pem, bytes):
        try:
            text = pem.decode("ascii")
        except UnicodeDecodeError as exc:
            raise ValidationError(
                f"A PEM public key is ASCII text; byte {exc.start} is not ASCII.", code="invalid"
            ) from None
    else:
        text = str(pem)
    text = text.strip()
    if not text:
        raise ValidationError("Paste a PEM public key.", code="empty")
    if len(text) > MAX_PEM_CHARS:
        raise ValidationError(
            f"That is too long for a public key ({len(text)} characters; at most {MAX_PEM_CHARS}).",
            code="too_long",
        )
    if "PRIVATE KEY" in text:
        raise ValidationError(
            "That is a private key. Paste the PUBLIC key only (and treat the private key as "
            "leaked).",
            code="private_key",
        )
    bad = _first_unstorable(text)
    if bad is not None:
        what = "a NUL character" if text[bad] == "\x00" else f"the character {text[bad]!r}"
        raise ValidationError(
            f"Not a PEM public key: it holds {what} at position {bad}.", code="unstorable"
        )
    if not text.isascii():
        raise ValidationError(
            "A PEM public key is ASCII text; this one holds non-ASCII characters.", code="invalid"
        )
    if "-----BEGIN CERTIFICATE-----" in text:
        raise ValidationError(
            "That is a certificate. Register its public key instead "
            "(openssl x509 -pubkey -noout -in cert.pem).",
            code="certificate",
        )
    if "-----BEGIN" not in text:
        raise ValidationError(
            "Not a PEM public key: PEM starts with '-----BEGIN PUBLIC KEY-----'.", code="invalid"
        )
    try:
        key = serialization.load_pem_public_key(text.encode("ascii"))
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
            f"Only ECDSA P-256 and Ed25519 keys are accepted; this is {_algorithm_name(key)}.",
            code="unsupported_key",
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
    existing = duplicate.first()
    if existing is not None:
        raise SigningKeyDuplicate(existing)
    return info


def signing_key_name_check(name: str) -> str:
    """The key's name, stripped; ``ValidationError`` (a ``NAME_ERROR_CODES`` code) when it is
    empty, too long or holds a character the database cannot store."""
    text = str(name).strip()
    if not text:
        raise ValidationError("Give the key a name.", code="name_empty")
    if len(text) > MAX_NAME_CHARS:
        raise ValidationError(
            f"The name is at most {MAX_NAME_CHARS} characters (this one has {len(text)}).",
            code="name_too_long",
        )
    bad = _first_unstorable(text.replace("\n", "\x00").replace("\r", "\x00"))
    if bad is not None:
        what = "a NUL character" if text[bad] == "\x00" else f"the character {text[bad]!r}"
        raise ValidationError(
            f"The name holds {what} at position {bad}; use printable text on one line.",
            code="name_unstorable",
        )
    return text


def signing_key_register(
    *,
    name: str,
    public_key_pem: str | bytes,
    by: Any = None,
    is_demo: bool = False,
) -> SigningKey:
    """Register a public key (fingerprint and algorithm computed); ``ValidationError`` naming
    the problem, ``SigningKeyDuplicate`` when it is registered already.

    Nothing is re-classified: no signer of a key can exist before the key is registered
    (evidence signed with an unregistered key is refused at ingest, and a key signer's row
    points at its ``SigningKey``), so there is no ``SignerClassChange`` to write and no stored
    consensus to refresh. The next upload's verification policy includes the key
    (``services.ingest.policy``: its version digest covers the active keys).
    """
    info = signing_key_check(public_key_pem)
    key = SigningKey(
        name=signing_key_name_check(name),
        public_key_pem=info.pem,
        fingerprint=info.fingerprint,
        algorithm=info.algorithm,
        is_demo=is_demo,
        registered_by=by if getattr(by, "is_authenticated", False) else None,
    )
    key.full_clean(validate_unique=False)  # the fingerprint: checked above, enforced below
    try:
        # Race: two registrations of one key at once both pass the check above; the unique
        # fingerprint lets one in, the other is answered like any duplicate.
        with transaction.atomic():
            key.save()
    except IntegrityError:
        existing = SigningKey.objects.filter(fingerprint=info.fingerprint).first()
        if existing is None:
            raise
        raise SigningKeyDuplicate(existing) from None
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
