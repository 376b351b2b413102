"""Request guards that run before any view reads the request or queries the database, and the
answers for what goes wrong anyway.

- ``UnstorableTextMiddleware``: a NUL in the path, a query parameter or a cookie is refused
  with 400 naming it; PostgreSQL cannot store or even compare text holding one. (Other text is
  storable: Django decodes paths and query strings with replacement characters, so no lone
  surrogate reaches a view.)
- ``RequestBodyLimitMiddleware``: a body over the route's cap is refused with 413 before it is
  read (``Content-Length``) or while it is read (chunked bodies); anonymous multipart bodies
  are parsed only on upload routes.
- ``DatabaseBusyMiddleware``: a request that could not get the database (locked, no free
  connection) answers 503 with ``Retry-After`` instead of a 500, with or without DEBUG.
- ``ApiJsonErrorsMiddleware``: every error under ``/api/`` and ``/v1/`` is JSON.
"""

from __future__ import annotations

import logging
import re
import sys
import tempfile
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.core.handlers.wsgi import LimitedStream
from django.core.signals import got_request_exception
from django.http import HttpRequest, HttpResponse, QueryDict
from django.urls import Resolver404, resolve
from django.utils.datastructures import MultiValueDict

from aicr_site.errors import database_busy_response, error_response, speaks_json
from aicr_site.lib.db import is_database_busy

logger = logging.getLogger(__name__)

GetResponse = Callable[[HttpRequest], HttpResponse]

UNSTORABLE = re.compile("\x00")
# Bodies read into memory up to this size; larger (chunked) ones spool to a temporary file.
SPOOL_IN_MEMORY_BYTES = 1024 * 1024
READ_CHUNK_BYTES = 64 * 1024


def _first_unstorable(items: Iterable[tuple[str, str]]) -> str | None:
    for name, value in items:
        if UNSTORABLE.search(name) or UNSTORABLE.search(value):
            return UNSTORABLE.sub("\N{REPLACEMENT CHARACTER}", name)
    return None


class UnstorableTextMiddleware:
    def __init__(self, get_response: GetResponse) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        refusal = self._refusal(request)
        if refusal is not None:
            where, name = refusal
            return error_response(
                request,
                status=400,
                message=(
                    f"The {where}{f' {name!r}' if name else ''} contains a NUL character "
                    "(U+0000), which cannot be stored or searched for."
                ),
                details={"parameter": name or where},
            )
        return self.get_response(request)

    @staticmethod
    def _refusal(request: HttpRequest) -> tuple[str, str] | None:
        if UNSTORABLE.search(request.path_info):
            return "URL path", ""
        query = [(key, value) for key, values in request.GET.lists() for value in values]
        name = _first_unstorable(query)
        if name is not None:
            return "query parameter", name
        name = _first_unstorable(request.COOKIES.items())
        if name is not None:
            return "cookie", name
        return None


class RequestTooLarge(Exception):
    pass


class RequestBodyLimitMiddleware:
    def __init__(self, get_response: GetResponse) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        upload_route = _route_name(request) in settings.REQUEST_UPLOAD_ROUTES
        # Read by the API's parsers and views; HttpRequest declares no such attribute.
        request.upload_route = upload_route  # type: ignore[attr-defined]
        raw_length = request.META.get("CONTENT_LENGTH") or ""
        if raw_length and not (raw_length.isascii() and raw_length.isdigit()):
            return error_response(
                request,
                status=400,
                message=f"Content-Length {raw_length[:40]!r} is not a number of bytes.",
            )
        # An upload route refuses an oversized Content-Length itself, before reading the body,
        # and logs the refusal (evidence_app.services.ingest.refuse_if_too_large).
        if raw_length and not upload_route and int(raw_length) > settings.REQUEST_MAX_BODY_BYTES:
            return _too_large(request, settings.REQUEST_MAX_BODY_BYTES)
        return self.get_response(request)

    def process_view(
        self, request: HttpRequest, view_func: Any, view_args: Any, view_kwargs: Any
    ) -> HttpResponse | None:
        """After sign-in is known, before CSRF or the view reads the body."""
        if (
            request.content_type == "multipart/form-data"
            and not getattr(request, "upload_route", False)
            and not request.user.is_authenticated
            and "authorization" not in request.headers
        ):
            # An anonymous multipart body is parsed (its files spooled to disk) only where
            # uploads are taken. Elsewhere it is left unread: the form sees no fields, so CSRF
            # refuses it as before, without the server having written its parts anywhere.
            request.upload_handlers = []  # DRF parses the stream itself: no file may be kept
            # Django's private parse caches (what ``request.POST``/``FILES`` return once set).
            request._post = QueryDict()  # type: ignore[attr-defined]
            request._files = MultiValueDict()  # type: ignore[attr-defined]
            return None
        if not request.META.get("CONTENT_LENGTH") and _is_chunked(request):
            limit = settings.REQUEST_MAX_BODY_BYTES
            if getattr(request, "upload_route", False):
                limit += settings.EVIDENCE_MAX_UPLOAD_BYTES  # the file and the form around it
            try:
                _buffer_chunked_body(request, limit)
            except RequestTooLarge:
                return _too_large(request, limit)
        return None


def _route_name(request: HttpRequest) -> str | None:
    try:
        return resolve(request.path_info, getattr(request, "urlconf", None)).view_name
    except Resolver404:
        return None


def _too_large(request: HttpRequest, limit: int) -> HttpResponse:
    # aicrd's wording (it answers INVALID_REQUEST with 413 too); the limit in the details.
    message = "Request body exceeds maximum allowed size"
    response = error_response(
        request,
        status=413,
        message=message if speaks_json(request) else f"{message} ({limit:,} bytes).",
        details={"limit_bytes": limit},
    )
    # The unread body would otherwise be taken as the next request on a kept-alive connection.
    response["Connection"] = "close"
    return response


def _is_chunked(request: HttpRequest) -> bool:
    return "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower()


def _buffer_chunked_body(request: HttpRequest, limit: int) -> None:
    """A chunked body has no Content-Length: Django would read it as empty. Read it here, up
    to ``limit`` bytes, and hand Django a stream of known length."""
    source = request.META.get("wsgi.input")
    if source is None or not request.META.get("wsgi.input_terminated"):
        return  # the server did not de-chunk it; Django reads nothing, as before
    spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY_BYTES)  # noqa: SIM115
    size = 0
    while chunk := source.read(READ_CHUNK_BYTES):
        size += len(chunk)
        if size > limit:
            spool.close()
            raise RequestTooLarge
        spool.write(chunk)
    spool.seek(0)
    request.META["CONTENT_LENGTH"] = str(size)
    # WSGIRequest reads its body from ``_stream``: point it at the buffered bytes.
    # The spool's file is unlinked on creation and freed when the request is collected.
    # (Private attribute, and django-stubs type LimitedStream for a BytesIO only.)
    request._stream = LimitedStream(spool, size)  # type: ignore[assignment, arg-type]


class DatabaseBusyMiddleware:
    """503 with Retry-After when the database was busy, wherever in the request it happened.

    A view's exception arrives in ``process_exception``. One raised inside another middleware
    (the session saved on the way out) never reaches this one: Django turns it into a 500 (with
    DEBUG, a traceback page) right there, so the exception is noted on the request when Django
    reports it (``got_request_exception``) and that 500 is replaced on its way out.
    """

    def __init__(self, get_response: GetResponse) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code == 500 and getattr(request, "database_busy", False):
            response.close()
            return database_busy_response(request)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not is_database_busy(exception):
            return None
        logger.warning("database busy on %s %s: %s", request.method, request.path, exception)
        return database_busy_response(request)


def _note_database_busy(sender: Any, request: HttpRequest | None = None, **kwargs: Any) -> None:
    # Sent from inside Django's exception handling: the exception is the current one.
    exception = sys.exc_info()[1]
    if request is not None and exception is not None and is_database_busy(exception):
        # Our own flag for the 503 page; HttpRequest declares no such attribute.
        request.database_busy = True  # type: ignore[attr-defined]


got_request_exception.connect(_note_database_busy, dispatch_uid="aicr_site.database_busy")


# Messages for error answers that reach /api/ or /v1/ as HTML or empty bodies.
_MESSAGES = {
    400: "The request could not be understood.",
    403: "Forbidden.",
    404: "Nothing is at this address.",
    405: "This method is not allowed here.",
    413: "The request body is too large.",
    500: "Something went wrong on our side; it has been logged.",
    503: "The service is busy; try again shortly.",
}
_KEPT_HEADERS = ("Allow", "Retry-After", "WWW-Authenticate", "Connection")


class ApiJsonErrorsMiddleware:
    """API clients get JSON for every error, whoever produced it (Django's 404 and 405, a 500
    with or without DEBUG): never a page, never a traceback."""

    def __init__(self, get_response: GetResponse) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code < 400 or not speaks_json(request) or _is_json(response):
            return response
        status = response.status_code
        message = _MESSAGES.get(status, "The request failed.")
        if status == 405 and response.has_header("Allow"):
            message = f"{request.method} is not allowed here; allowed: {response['Allow']}."
        json_response = error_response(
            request,
            status=status,
            message=message,
            headers={name: response[name] for name in _KEPT_HEADERS if response.has_header(name)},
        )
        response.close()
        return json_response


def _is_json(response: HttpResponse) -> bool:
    media_type = response.get("Content-Type", "").split(";", 1)[0].strip().lower()
    return media_type == "application/json" or media_type.endswith("+json")
