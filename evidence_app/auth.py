"""DRF authentication by ``Authorization: Bearer <token>`` and role permissions.

``BearerTokenAuthentication`` sets ``request.user`` to the token's user and ``request.auth`` to
the ``ApiToken`` row. Without a header the request is anonymous (reads stay public); a header
with a bad token is a 401. ``HasRole(...)`` allows a request whose token carries one of the
roles (401 when anonymous, 403 otherwise). A token acts with its role only while its user is
still in the group of that name; session users get their roles from their groups; superusers
hold every role (``evidence_app.permissions``).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.throttling import UserRateThrottle

from evidence_app import permissions
from evidence_app.models import ApiToken
from evidence_app.services.tokens import token_authenticate

KEYWORD = "Bearer"


class BearerTokenAuthentication(BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        header = get_authorization_header(request).split()
        if not header or header[0].lower() != KEYWORD.lower().encode():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed(
                "Invalid Authorization header: use 'Bearer <token>'."
            )
        try:
            raw = header[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("Invalid token.") from None
        token = token_authenticate(raw)
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid, unknown or revoked token.")
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return f'{KEYWORD} realm="api"'


class HasRole(BasePermission):
    """``permission_classes = [HasRole.of(Role.CONTRIBUTOR, Role.MAINTAINER)]``."""

    roles: frozenset[str] = frozenset()
    message = "Your token's role may not do this."

    @classmethod
    def of(cls, *roles: str) -> type[HasRole]:
        names = ", ".join(sorted(roles))
        return type(
            "HasRole",
            (cls,),
            {"roles": frozenset(roles), "message": f"This needs a token with role {names}."},
        )

    def has_permission(self, request: Request, view: Any) -> bool:
        if not request.user.is_authenticated:
            return False  # DRF answers 401 (with the Bearer challenge)
        return bool(permissions.roles_of(request.user, token=request.auth) & self.roles)


class EvidenceUploadThrottle(UserRateThrottle):
    """Rate-limits evidence uploads per user, at
    ``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["evidence-upload"]``; the upload action
    (``EvidenceViewSet.create``) declares it."""

    scope = "evidence-upload"


class BearerTokenScheme(OpenApiAuthenticationExtension):
    """Describes ``BearerTokenAuthentication`` in the OpenAPI document."""

    target_class = "evidence_app.auth.BearerTokenAuthentication"
    name = "bearerToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API token from `manage.py create_token USER --role ROLE`.",
        }
