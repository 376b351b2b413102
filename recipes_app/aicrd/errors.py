"""aicrd's error envelope (``components.schemas.Error`` in server.yaml) and how errors map to it.

``{code, message, details, requestId, timestamp, retryable}``: ``details`` is omitted when empty
(Go ``omitempty``), ``timestamp`` is RFC 3339 UTC, ``retryable`` follows the code (aicrd's
``retryableFromCode``). A resolution error keeps AICR's message as ``message`` and its
machine-readable context (``uncovered`` with ``validCompletions``, ``requiresOS``) as
``details``, exactly where aicrd's ``WriteErrorFromErr`` puts a ``StructuredError``'s context.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from django.http import HttpRequest, JsonResponse

from recipes_app.resolver import ResolutionError

INVALID_REQUEST = "INVALID_REQUEST"
NOT_FOUND = "NOT_FOUND"
METHOD_NOT_ALLOWED = "METHOD_NOT_ALLOWED"
INTERNAL = "INTERNAL"
SERVICE_UNAVAILABLE = "SERVICE_UNAVAILABLE"

_RETRYABLE = {INTERNAL: True, SERVICE_UNAVAILABLE: True}
_STATUS = {
    INVALID_REQUEST: 400,
    NOT_FOUND: 404,
    METHOD_NOT_ALLOWED: 405,
    INTERNAL: 500,
    SERVICE_UNAVAILABLE: 503,
}

REQUEST_ID_HEADER = "X-Request-Id"


class AicrdError(Exception):
    """An error answer in aicrd's envelope; ``status`` defaults from ``code``."""

    def __init__(
        self,
        message: str,
        *,
        code: str = INVALID_REQUEST,
        details: Mapping[str, Any] | None = None,
        status: int | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.message = message
        self.code = code
        self.details = dict(details) if details else None
        self.status = status or _STATUS.get(code, 500)
        self.headers = dict(headers or {})
        super().__init__(f"[{code}] {message}")


def request_id(request: HttpRequest) -> str:
    """The client's ``X-Request-Id`` when it is a UUID (aicrd echoes it), else a fresh one."""
    supplied = request.headers.get(REQUEST_ID_HEADER, "")
    if supplied and len(supplied) <= 64:
        try:
            return str(uuid.UUID(supplied))
        except ValueError:
            pass
    return str(uuid.uuid4())


def timestamp() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def error_body(
    *, code: str, message: str, request_id: str, details: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {"code": code, "message": message}
    if details:
        body["details"] = dict(details)
    body.update(requestId=request_id, timestamp=timestamp(), retryable=_RETRYABLE.get(code, False))
    return body


def error_response(error: AicrdError, *, request_id: str) -> JsonResponse:
    response = JsonResponse(
        error_body(
            code=error.code, message=error.message, request_id=request_id, details=error.details
        ),
        status=error.status,
    )
    for name, value in error.headers.items():
        response[name] = value
    response[REQUEST_ID_HEADER] = request_id
    return response


def from_resolution(exc: ResolutionError, *, criteria: Mapping[str, str]) -> AicrdError:
    """A resolver error as aicrd reports it: AICR's message, its context as ``details``."""
    details: dict[str, Any] = {}
    if exc.uncovered:
        details["uncovered"] = [
            {
                "dimension": dim,
                "requestedValue": str(criteria.get(dim, "")),
                "validCompletions": [
                    completion_tuple(rendered) for rendered in exc.valid_completions.get(dim, [])
                ],
            }
            for dim in exc.uncovered
        ]
    if exc.requires_os:
        details["requiresOS"] = True
    return AicrdError(exc.message, code=exc.code or INVALID_REQUEST, details=details)


def completion_tuple(rendered: str | Mapping[str, str]) -> dict[str, str]:
    """``"service=eks, os=ubuntu"`` → ``{"os": "ubuntu", "service": "eks"}``.

    AICR's tuples are Go maps, which encoding/json writes with sorted keys.
    """
    if isinstance(rendered, Mapping):
        items = [(str(key), str(value)) for key, value in rendered.items()]
    else:
        pairs = (part.partition("=") for part in str(rendered).split(","))
        items = [(key.strip(), value.strip()) for key, sep, value in pairs if sep and key.strip()]
    return dict(sorted(items))
