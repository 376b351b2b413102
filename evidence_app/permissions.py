"""Who may do what: the one place roles are computed (HTML views, htmx partials, the API and
the admin all ask here).

A user's roles are the Django groups they belong to that are named after a ``Role``; a
superuser holds every role. Nothing else grants a role: ``is_staff`` only opens the admin site
(whose model permissions Django checks separately). An inactive or anonymous user holds none.

An API token acts with its own role only while its user still holds that role (the token's
role intersected with the user's current roles), so removing someone from a group takes effect
on their tokens at once.
"""

from __future__ import annotations

from typing import Any

from evidence_app.models import ApiToken, Evidence, Role

UPLOAD_ROLES = frozenset({Role.CONTRIBUTOR, Role.MAINTAINER})
EXPORT_ROLES = frozenset({Role.AUDITOR, Role.MAINTAINER})
_CACHE_ATTR = "_evidence_roles"


def roles_of(user: Any, *, token: Any = None) -> set[str]:
    """The roles ``user`` holds (cached on the user object for the request); for a request
    authenticated by an API ``token`` (DRF's ``request.auth``), the token's role if its user
    still holds it. Any other ``token`` (a session request has None) is ignored."""
    if isinstance(token, ApiToken):
        return {token.role} & roles_of(user if user is not None else token.user)
    if user is None or not getattr(user, "is_authenticated", False):
        return set()
    if not getattr(user, "is_active", False):
        return set()
    if user.is_superuser:
        return set(Role.values)
    cached = getattr(user, _CACHE_ATTR, None)
    if cached is None:
        cached = set(user.groups.filter(name__in=Role.values).values_list("name", flat=True))
        setattr(user, _CACHE_ATTR, cached)
    return set(cached)


def can_upload(user: Any, roles: set[str] | None = None) -> bool:
    return bool((roles_of(user) if roles is None else roles) & UPLOAD_ROLES)


def can_export(user: Any, roles: set[str] | None = None) -> bool:
    """Exports (streamed, built by a worker, audit packages): auditors and maintainers."""
    return bool((roles_of(user) if roles is None else roles) & EXPORT_ROLES)


def can_withdraw(user: Any, evidence: Evidence, roles: set[str] | None = None) -> bool:
    """A maintainer may withdraw any evidence; a contributor only what they uploaded.
    ``roles``: the roles the caller acts with (default: the user's)."""
    roles = roles_of(user) if roles is None else roles
    if Role.MAINTAINER in roles:
        return True
    return (
        Role.CONTRIBUTOR in roles
        and user is not None
        and evidence.uploaded_by_id is not None
        and evidence.uploaded_by_id == getattr(user, "pk", None)
    )
