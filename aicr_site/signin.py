"""Sign-in throttling (django-axes hooks): which username a failure counts against, and the
answer a locked-out client gets.

Authentication compares usernames after the sign-in form's normalisation (NFKC, surrounding
whitespace stripped) and then exactly, case included. The throttle keys the same value, so
``"admin "`` or its full-width letters (U+FF41…) cannot open a fresh counter for the account
``admin``; ``"Admin"`` is a different account (and counter), as it is for authentication.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

# Longer inputs never match an account; the key stays bounded whatever a client sends.
MAX_USERNAME_LENGTH = 150


def normalise_username(raw: object) -> str:
    """The username as ``AuthenticationForm`` hands it to ``authenticate()``."""
    text = unicodedata.normalize("NFKC", str(raw or "")).strip()
    return get_user_model().normalize_username(text)[:MAX_USERNAME_LENGTH]


def throttle_username(request: HttpRequest, credentials: Mapping[str, Any] | None) -> str:
    field = get_user_model().USERNAME_FIELD
    if credentials and credentials.get(field) is not None:
        return normalise_username(credentials.get(field))
    return normalise_username(request.POST.get(field, ""))


def lockout_response(
    request: HttpRequest,
    original_response: HttpResponse | None = None,
    credentials: Mapping[str, Any] | None = None,
) -> HttpResponse:
    """429 with a page that says what happened and when to try again (site and admin alike)."""
    minutes = settings.LOGIN_COOLOFF_MINUTES
    response = TemplateResponse(
        request,
        "signin_locked.html",
        {"failure_limit": settings.LOGIN_FAILURE_LIMIT, "cooloff_minutes": minutes},
        status=429,
    )
    response["Retry-After"] = str(minutes * 60)
    return response.render()
