"""Error answers in the shape each part of the site speaks, and the site's error handlers.

``/v1/`` (the aicrd drop-in) answers in aicrd's envelope; ``/api/`` in one shape for every
error, DRF's included (``api_exception_handler``): ``{"code", "message", "details",
"request_id"}`` plus ``"detail"`` (the message, as DRF clients read it) and, for DRF's field
errors, the fields at the top level too; every other path a small standalone HTML page. The
HTML page needs no session, user or database, so it renders even when the database failed.
"""

from __future__ import annotations

from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string

from recipes_app.aicrd.errors import (
    INTERNAL,
    INVALID_REQUEST,
    METHOD_NOT_ALLOWED,
    NOT_FOUND,
    REQUEST_ID_HEADER,
    SERVICE_UNAVAILABLE,
    error_body,
    request_id,
)

AICRD_PREFIX = "/v1/"
API_PREFIX = "/api/"

# aicrd's codes (docs/user/api-reference.md, "Error Codes"); 413 is INVALID_REQUEST there too.
_AICRD_CODES = {
    404: NOT_FOUND,
    405: METHOD_NOT_ALLOWED,
    401: "UNAUTHORIZED",
    403: "UNAUTHORIZED",
    429: "RATE_LIMIT_EXCEEDED",
    503: SERVICE_UNAVAILABLE,
}


_API_CODES = {
    400: "invalid-request",
    401: "not-authenticated",
    403: "permission-denied",
    404: "not-found",
    405: "method-not-allowed",
    406: "not-acceptable",
    409: "conflict",
    413: "too-large",
    415: "unsupported-media-type",
    422: "unprocessable",
    429: "throttled",
    503: "unavailable",
}


def speaks_json(request: HttpRequest) -> bool:
    return request.path.startswith((AICRD_PREFIX, API_PREFIX))


def aicrd_code(status: int) -> str:
    return _AICRD_CODES.get(status, INTERNAL if status >= 500 else INVALID_REQUEST)


def error_response(
    request: HttpRequest,
    *,
    status: int,
    message: str,
    headers: Mapping[str, str] | None = None,
    details: Mapping[str, Any] | None = None,
) -> HttpResponse:
    """``message`` in the shape the route speaks; ``details`` are machine-readable context."""
    response: HttpResponse
    if request.path.startswith(AICRD_PREFIX):
        rid = request_id(request)
        response = JsonResponse(
            error_body(code=aicrd_code(status), message=message, request_id=rid, details=details),
            status=status,
        )
        response[REQUEST_ID_HEADER] = rid
    elif request.path.startswith(API_PREFIX):
        rid = request_id(request)
        response = JsonResponse(
            api_error_body(status=status, message=message, request_id=rid, details=details),
            status=status,
        )
        response[REQUEST_ID_HEADER] = rid
    else:
        title = HTTPStatus(status).phrase
        response = HttpResponse(
            render_to_string("error.html", {"title": title, "message": message}),
            status=status,
            content_type="text/html; charset=utf-8",
        )
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def api_error_code(status: int) -> str:
    """A stable machine-readable code for an ``/api/`` error status."""
    return _API_CODES.get(status, "internal" if status >= 500 else "invalid-request")


def api_error_body(
    *,
    status: int,
    message: str,
    request_id: str,
    details: Mapping[str, Any] | None = None,
    code: str | None = None,
) -> dict[str, Any]:
    """The ``/api/`` error shape. ``details`` also stay at the top level, where clients of the
    earlier ``{"detail": …, **details}`` shape read them."""
    return {
        **(details or {}),
        "code": code or api_error_code(status),
        "message": message,
        "detail": message,
        "details": dict(details or {}),
        "request_id": request_id,
    }


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Any:
    """DRF's handler, its answer put in the ``/api/`` error shape (``REST_FRAMEWORK``)."""
    from rest_framework.views import exception_handler

    response = exception_handler(exc, context)
    request = context.get("request")
    if response is None or request is None:
        return response  # an unexpected exception: Django's 500 handler answers (JSON too)
    data = response.data
    if isinstance(data, Mapping) and isinstance(data.get("detail"), str):
        message = str(data["detail"])
        details = {key: value for key, value in data.items() if key != "detail"}
    else:
        message = "The request is invalid; see details."
        details = dict(data) if isinstance(data, Mapping) else {"errors": data}
    default_code = getattr(exc, "default_code", None)
    code = default_code.replace("_", "-") if isinstance(default_code, str) else None
    rid = request_id(request)
    response.data = api_error_body(
        status=response.status_code,
        message=message,
        request_id=rid,
        details=details,
        code=code if response.status_code < 500 else None,
    )
    response[REQUEST_ID_HEADER] = rid
    return response


def database_busy_response(request: HttpRequest) -> HttpResponse:
    """The database could not take the request now (locked, no free connection, or down)."""
    return error_response(
        request,
        status=503,
        message=(
            "The database is busy or unreachable and could not take this request; nothing was "
            "changed. "
            f"Try again in {settings.DB_RETRY_AFTER_SECONDS} s."
        ),
        headers={"Retry-After": str(settings.DB_RETRY_AFTER_SECONDS)},
    )


# --- handlers (aicr_site/urls.py: handler400 … handler500) ---------------------------------


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return error_response(request, status=400, message="The request could not be understood.")


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    message = str(exception) if exception and str(exception) else "You may not do this."
    return error_response(request, status=403, message=message)


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return error_response(request, status=404, message="Nothing is at this address.")


def server_error(request: HttpRequest) -> HttpResponse:
    return error_response(
        request,
        status=500,
        message="Something went wrong on our side; it has been logged.",
    )
