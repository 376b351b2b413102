"""Signers: who verified evidence comes from, which class they are in, and whether they count.

Classification (AICR semantics, ``corroborate.allowlist``): a keyless signer's verified
(issuer, identity) is looked up in the allowlist in force — first-party by an anchored
identity regex, community/partner by the 32-hex source slug. Anything else is *reported*:
shown, never counted. A key-signed signer is one registered key: class ``registered-key``,
counted while the key is active.

The allowlist is append-only (``Allowlist`` rows; the newest is in force). Publishing a new
version re-classifies every keyless signer in the same transaction and writes a
``SignerClassChange`` for each one whose class or counting changed.

Accepted issuers (the keyless identity policy): ``settings.EVIDENCE_ACCEPTED_ISSUERS``
(default: GitHub Actions, GitLab, Google accounts and Sigstore's own OAuth issuer — the
public-good Fulcio's common issuers), the issuers named by the allowlist in force, the issuers
configured on an enabled private ``TrustRoot``, and the ``AcceptedIssuer`` rows maintainers add
(``issuer_accept``). A valid signature from any other issuer (e.g. a GitHub Enterprise Server's
``https://token.actions.githubusercontent.com/<enterprise>``) passes the signature step but is
classified *reported* — never counted — saying its issuer is not accepted; once accepted, its
signer is classified by the allowlist like any other. The identity itself is learnt from the
verified certificate (optionally restricted by ``EVIDENCE_IDENTITY_REGEX``) and only the
allowlist gives it weight.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import transaction

from evidence_app.consensus import stored
from evidence_app.corroborate import allowlist as al
from evidence_app.corroborate.errors import AllowlistError
from evidence_app.corroborate.labels import source_label
from evidence_app.models import (
    AcceptedIssuer,
    Allowlist,
    Signer,
    SignerClass,
    SignerClassChange,
    SignerKind,
    SigningKey,
)
from evidence_app.services import trust_roots
from evidence_app.verification import SignerClaims

logger = logging.getLogger(__name__)

KEY_ISSUER = "publickey"
"""Key signers' source id is ``source_id(KEY_ISSUER, "sha256:<fingerprint>")``."""

_CLASS_FROM_ALLOWLIST = {
    al.FIRST_PARTY: SignerClass.FIRST_PARTY,
    al.COMMUNITY: SignerClass.COMMUNITY,
    al.PARTNER: SignerClass.PARTNER,
}

_parsed_cache: dict[int, al.Allowlist | None] = {}
_parsed_lock = threading.Lock()


# --- the allowlist in force ------------------------------------------------------------------


def allowlist_parse(body: str | bytes) -> al.Allowlist:
    """Parse and validate allowlist YAML; ``ValidationError`` with AICR's message."""
    data = body.encode("utf-8") if isinstance(body, str) else bytes(body)
    try:
        return al.parse_allowlist(data)
    except AllowlistError as exc:
        raise ValidationError(str(exc), code="invalid_allowlist") from None


def _parsed(row: Allowlist | None) -> al.Allowlist | None:
    if row is None:
        return None
    with _parsed_lock:
        if row.pk in _parsed_cache:
            return _parsed_cache[row.pk]
    try:
        parsed: al.Allowlist | None = al.parse_allowlist(row.body.encode("utf-8"))
    except AllowlistError:
        # Versions are validated when published; a failure here means the parser changed.
        logger.exception(
            "allowlist #%s no longer parses; treating every signer as reported", row.pk
        )
        parsed = None
    with _parsed_lock:
        _parsed_cache[row.pk] = parsed
    return parsed


def allowlist_in_force() -> tuple[Allowlist | None, al.Allowlist | None]:
    row = Allowlist.objects.in_force()
    return row, _parsed(row)


def accepted_issuers(allowlist: al.Allowlist | None = None) -> list[str]:
    """Issuers whose keyless signers are classified by the allowlist (module docstring)."""
    if allowlist is None:
        allowlist = allowlist_in_force()[1]
    return issuers_from(allowlist, trust_roots.root_issuers() + maintainer_issuers())


def maintainer_issuers() -> list[str]:
    """The issuers maintainers accepted (``AcceptedIssuer`` rows)."""
    return list(AcceptedIssuer.objects.order_by("issuer").values_list("issuer", flat=True))


_ISSUER_URL = URLValidator(schemes=["https"])


def issuer_check(issuer: str) -> str:
    """``issuer`` as it will be matched (exactly, trimmed), or ``ValidationError``: an
    ``https://`` URL, as Fulcio writes OIDC issuers into certificates."""
    value = (issuer or "").strip()
    if not value:
        raise ValidationError("An issuer is required.", code="issuer_required")
    if any(c.isspace() or not c.isprintable() for c in value):
        raise ValidationError(
            "An issuer is one URL: no spaces or control characters.", code="issuer_invalid"
        )
    try:
        _ISSUER_URL(value)
    except ValidationError:
        raise ValidationError(
            f"{value[:200]!r} is not an https:// URL (OIDC issuers are https URLs).",
            code="issuer_invalid",
        ) from None
    return value


def issuer_accept(*, issuer: str, note: str = "", by: Any = None) -> AcceptedIssuer:
    """Accept ``issuer`` for keyless signatures (recorded with who and when); the verification
    policy picks it up on the next upload (``ingest.policy_snapshot`` versions the table)."""
    value = issuer_check(issuer)
    if AcceptedIssuer.objects.filter(issuer=value).exists():
        raise ValidationError(f"{value} is already accepted.", code="issuer_exists")
    return AcceptedIssuer.objects.create(
        issuer=value,
        note=" ".join((note or "").split())[:500],
        added_by=by if getattr(by, "is_authenticated", False) else None,
    )


def issuers_from(allowlist: al.Allowlist | None, root_issuers: list[str]) -> list[str]:
    """``accepted_issuers`` from an already read allowlist and enabled roots' issuers."""
    issuers: list[str] = list(getattr(settings, "EVIDENCE_ACCEPTED_ISSUERS", []))
    if allowlist is not None:
        issuers.extend(allowlist.issuers)
    issuers.extend(root_issuers)
    return list(dict.fromkeys(i for i in issuers if i))


# --- classification --------------------------------------------------------------------------


@dataclass(frozen=True)
class SignerDecision:
    """How a verified signer is filed, before anything is written."""

    kind: str
    issuer: str
    identity: str
    source_id: str
    signer_class: str
    counted: bool
    label: str
    key: SigningKey | None = None
    issuer_listed: bool = True  # False: a keyless issuer this site does not accept

    @property
    def slug(self) -> str:
        return self.source_id[:32]

    @property
    def detail(self) -> str:
        if self.kind == SignerKind.KEY:
            assert self.key is not None
            demo = (
                "signed with a demo key (its private key is public): labelled demo; "
                if self.key.is_demo
                else ""
            )
            return (
                f"registered key {self.key.name!r} (sha256 {self.key.fingerprint[:16]}…): "
                f"{demo}class registered-key, counted"
            )
        if self.counted:
            return f"{self.signer_class} signer {self.label!r} on the allowlist: counted"
        if not self.issuer_listed:
            return (
                f"reported: {self.identity} via {self.issuer} is verified, but this site does "
                "not accept that issuer (not in the accepted issuers; a maintainer may accept "
                "it, then the allowlist classifies it); shown, never counted"
            )
        return (
            f"reported: {self.identity} via {self.issuer} is verified but not on the allowlist; "
            "shown, never counted"
        )

    def summary(self) -> dict[str, object]:
        return {
            "identity": self.identity,
            "issuer": self.issuer,
            "class": self.signer_class,
            "counted": self.counted,
            "slug": self.slug,
            "label": self.label,
        }


def key_source_id(fingerprint: str) -> str:
    return al.source_id(KEY_ISSUER, f"sha256:{fingerprint}")


def classify_keyless(
    issuer: str, identity: str, allowlist: al.Allowlist | None, *, issuer_listed: bool = True
) -> SignerDecision:
    """``issuer_listed`` false: the issuer is accepted nowhere, so the signer is reported
    whatever the allowlist says (an allowlist entry's issuer is accepted, so none matches)."""
    result = al.classify_signer(allowlist, issuer, identity)
    slug = al.source_slug(issuer, identity)
    if result.allowlisted and issuer_listed:
        signer_class = _CLASS_FROM_ALLOWLIST[result.class_]
        label = result.label or source_label(result.class_, identity, slug)
    else:
        signer_class = SignerClass.REPORTED
        label = source_label(al.COMMUNITY, identity, slug)
    return SignerDecision(
        kind=SignerKind.KEYLESS,
        issuer=issuer,
        identity=identity,
        source_id=al.source_id(issuer, identity),
        signer_class=signer_class,
        counted=result.allowlisted and issuer_listed,
        label=label[:200],
        issuer_listed=issuer_listed,
    )


def classify(
    claims: SignerClaims,
    *,
    allowlist: al.Allowlist | None,
    keys: Mapping[int, SigningKey] | None = None,
) -> SignerDecision:
    """Classify the signer established by verification (``SignatureOutcome.signer``).

    ``keys``: the active keys the signature was verified against, by pk, as already read for
    the verification policy (saves a query); a key not in it is read from the database.
    """
    if claims.mode == "key":
        key_id = int(claims.key_id or 0)
        key = (keys or {}).get(key_id) or SigningKey.objects.get(pk=key_id)
        return SignerDecision(
            kind=SignerKind.KEY,
            issuer="",
            identity="",
            source_id=key_source_id(key.fingerprint),
            signer_class=SignerClass.REGISTERED_KEY,
            counted=key.revoked_at is None,
            label=key.name[:200],
            key=key,
        )
    assert claims.issuer
    assert claims.identity
    return classify_keyless(
        claims.issuer, claims.identity, allowlist, issuer_listed=claims.issuer_listed
    )


def signer_upsert(decision: SignerDecision, *, allowlist_row: Allowlist | None) -> Signer:
    """The ``Signer`` row for ``decision`` (created with a first history entry when new).

    Call inside the ingest transaction. An existing signer keeps its class: the class is
    maintained by ``allowlist_publish`` and ``signing_key_revoke``.
    """
    signer = Signer.objects.filter(source_id=decision.source_id).first()
    if signer is not None:
        return signer
    if allowlist_row is not None and decision.kind == SignerKind.KEYLESS:
        # Race: a new signer classified against allowlist N while N+1 is being published would
        # be missed by the re-classification. Publishing locks the version in force first, so
        # taking the same lock here orders the two; re-read the version in force under it.
        locked = Allowlist.objects.select_for_update().filter(pk=allowlist_row.pk).first()
        current_row, current = allowlist_in_force()
        if locked is not None and current_row is not None and current_row.pk != locked.pk:
            decision = classify_keyless(
                decision.issuer, decision.identity, current, issuer_listed=decision.issuer_listed
            )
            allowlist_row = current_row
    signer, created = Signer.objects.get_or_create(
        source_id=decision.source_id,
        defaults={
            "kind": decision.kind,
            "issuer": decision.issuer,
            "identity": decision.identity,
            "key": decision.key,
            "slug": decision.slug,
            "signer_class": decision.signer_class,
            "counted": decision.counted,
            "label": decision.label,
        },
    )
    if created:
        SignerClassChange.objects.create(
            signer=signer,
            from_class="",
            to_class=signer.signer_class,
            from_counted=None,
            to_counted=signer.counted,
            allowlist=allowlist_row if decision.kind == SignerKind.KEYLESS else None,
            reason=(
                f"first seen; classified against allowlist #{allowlist_row.pk}"
                if allowlist_row is not None and decision.kind == SignerKind.KEYLESS
                else "first seen"
            ),
        )
    return signer


# --- publishing a new allowlist ---------------------------------------------------------------


@transaction.atomic
def allowlist_publish(*, body: str, note: str = "", by: Any = None) -> Allowlist:
    """Publish a new allowlist version and re-classify every keyless signer against it."""
    parsed = allowlist_parse(body)
    # Race: two maintainers publishing at once, or a new signer being classified against the
    # version in force (see ``signer_upsert``): lock the version in force before replacing it.
    previous = Allowlist.objects.select_for_update().order_by("-created_at", "-pk").first()
    row = Allowlist(body=body, note=note[:500], created_by=by)
    row.full_clean()
    row.save()
    with _parsed_lock:
        _parsed_cache[row.pk] = parsed
    who = f" by {by}" if by else ""
    reason = f"allowlist #{row.pk} published{who}" + (f": {note}" if note else "")
    if previous is not None:
        reason += f" (replaces #{previous.pk})"
    signers_reclassify(allowlist_row=row, allowlist=parsed, reason=reason)
    return row


def signers_reclassify(
    *, allowlist_row: Allowlist, allowlist: al.Allowlist | None, reason: str
) -> int:
    """Re-classify every keyless signer; returns how many changed (inside the caller's atomic)."""
    changed: list[int] = []
    # Race: a second publish (or a key revocation) changing the same signers; the row locks
    # serialise them, and the whole loop runs in the publishing transaction. NO KEY UPDATE
    # leaves evidence inserts that reference a signer (KEY SHARE) unblocked.
    for signer in (
        Signer.objects.select_for_update(no_key=True).filter(kind=SignerKind.KEYLESS).order_by("pk")
    ):
        decision = classify_keyless(signer.issuer, signer.identity, allowlist)
        if (decision.signer_class, decision.counted, decision.label) == (
            signer.signer_class,
            signer.counted,
            signer.label,
        ):
            continue
        if (decision.signer_class, decision.counted) != (signer.signer_class, signer.counted):
            SignerClassChange.objects.create(
                signer=signer,
                from_class=signer.signer_class,
                to_class=decision.signer_class,
                from_counted=signer.counted,
                to_counted=decision.counted,
                allowlist=allowlist_row,
                reason=reason[:500],
            )
            changed.append(signer.pk)
        signer.signer_class = decision.signer_class
        signer.counted = decision.counted
        signer.label = decision.label
        signer.save(update_fields=["signer_class", "counted", "label"])
    stored.signers_changed(changed)
    return len(changed)


def seeded_allowlist_ensure() -> Allowlist:
    """The allowlist in force, or AICR's vendored allowlist as version 1 (idempotent)."""
    existing = Allowlist.objects.in_force()
    if existing is not None:
        return existing
    return allowlist_publish(body=vendored_allowlist_text(), note=SEED_NOTE)


SEED_NOTE = "AICR upstream recipes/evidence/allowlist.yaml (main-08), seeded"

VENDORED_ALLOWLIST = Path(__file__).resolve().parent.parent / "data" / "aicr-allowlist.yaml"


def vendored_allowlist_text() -> str:
    return VENDORED_ALLOWLIST.read_text()
