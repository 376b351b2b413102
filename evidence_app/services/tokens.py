"""API bearer tokens: ``aicr_<prefix>_<secret>``, shown once, stored as sha256 only.

The prefix (10 random hex characters) is public and unique: it finds the row without scanning;
the secret (``secrets.token_urlsafe(32)``, 256 bits) is checked by comparing the sha256 of the
whole token with ``hmac.compare_digest``. A token carries one role (contributor, auditor,
maintainer); its user is also put in the Django ``Group`` of that name so the admin and
session views can see the role.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, User
from django.db import transaction
from django.utils import timezone

from evidence_app.models import ApiToken, Role

TOKEN_PREFIX = "aicr_"  # noqa: S105 - a public marker, not a secret
PREFIX_CHARS = 10
SECRET_BYTES = 32
_TOKEN = re.compile(rf"{TOKEN_PREFIX}([0-9a-f]{{{PREFIX_CHARS}}})_([A-Za-z0-9_-]{{20,100}})")
LAST_USED_EVERY_SECONDS = 60


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def role_check(role: str) -> str:
    if role not in Role.values:
        raise ValueError(f"unknown role {role!r} (one of {', '.join(Role.values)})")
    return role


@transaction.atomic
def user_with_role(*, username: str, role: str) -> User:
    """The user ``username`` (created, without a usable password, if missing) in the role's
    group."""
    role_check(role)
    user, created = get_user_model().objects.get_or_create(username=username)
    if created:
        user.set_unusable_password()  # API-only: no password until someone sets one
        user.save(update_fields=["password"])
    group, _ = Group.objects.get_or_create(name=role)
    user.groups.add(group)
    return user


def token_create(*, user: User, role: str) -> tuple[ApiToken, str]:
    """A new token for ``user`` in ``role``: (row, the token text — shown once, never stored)."""
    role_check(role)
    for _ in range(5):
        prefix = secrets.token_hex(PREFIX_CHARS // 2)
        if not ApiToken.objects.filter(prefix=prefix).exists():
            break
    else:  # pragma: no cover - 40 random bits colliding five times
        raise RuntimeError("could not find a free token prefix")
    token = f"{TOKEN_PREFIX}{prefix}_{secrets.token_urlsafe(SECRET_BYTES)}"
    row = ApiToken(user=user, role=role, prefix=prefix, key_hash=_hash(token))
    row.full_clean()
    row.save()
    return row, token


def token_authenticate(token: str) -> ApiToken | None:
    """The active token row for ``token``, or None (malformed, unknown, revoked, wrong)."""
    m = _TOKEN.fullmatch(token or "")
    if m is None:
        return None
    row = ApiToken.objects.active().select_related("user").filter(prefix=m.group(1)).first()
    if row is None or not hmac.compare_digest(row.key_hash, _hash(token)):
        return None
    now = timezone.now()
    if (
        row.last_used_at is None
        or (now - row.last_used_at).total_seconds() > LAST_USED_EVERY_SECONDS
    ):
        ApiToken.objects.filter(pk=row.pk).update(last_used_at=now)
    return row


def token_revoke(*, token: ApiToken) -> ApiToken:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    return token
