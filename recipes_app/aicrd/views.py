"""aicrd's ``/v1/recipe`` and ``/v1/query``: read-only, CSRF-exempt (no session is used).

Each view reads its input (``inputs``), resolves through ``resolve.resolve_criteria`` and
answers JSON; every failure is an ``AicrdError`` rendered in aicrd's envelope with the
request's ``X-Request-Id``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from datetime import date, datetime
from functools import wraps
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from aicr_site.lib.db import is_database_busy
from recipes_app.aicrd import hydrate as hydration
from recipes_app.aicrd.errors import (
    INTERNAL,
    METHOD_NOT_ALLOWED,
    NOT_FOUND,
    REQUEST_ID_HEADER,
    SERVICE_UNAVAILABLE,
    AicrdError,
    error_response,
    request_id,
)
from recipes_app.aicrd.inputs import (
    CriteriaInput,
    InputError,
    criteria_from_query,
    criteria_from_recipe_criteria,
    parse_body,
    query_from_body,
    read_body,
)
from recipes_app.aicrd.resolve import resolve_criteria
from recipes_app.aicrd.values import values_reader

logger = logging.getLogger(__name__)

CACHE_CONTROL = "public, max-age=600"  # aicrd's defaults.RecipeCacheTTL (10 minutes)
ALLOWED_METHODS = ("GET", "POST")

View = Callable[[HttpRequest], HttpResponse]


def aicrd_endpoint(view: View) -> Callable[[HttpRequest], HttpResponse]:
    """Method check, request id and the error envelope around an aicrd view."""

    @csrf_exempt
    @wraps(view)
    def wrapper(request: HttpRequest) -> HttpResponse:
        rid = request_id(request)
        try:
            if request.method not in ALLOWED_METHODS:
                raise AicrdError(
                    "Method not allowed",
                    code=METHOD_NOT_ALLOWED,
                    details={"method": request.method, "allowed": list(ALLOWED_METHODS)},
                    headers={"Allow": ", ".join(ALLOWED_METHODS)},
                )
            response = view(request)
        except AicrdError as error:
            return error_response(error, request_id=rid)
        except Exception as exc:
            if is_database_busy(exc):
                # Retryable: the database was locked or out of connections for a moment.
                logger.warning("aicrd %s %s: database busy: %s", request.method, request.path, exc)
                return error_response(
                    AicrdError(
                        "Database busy",
                        code=SERVICE_UNAVAILABLE,
                        headers={"Retry-After": str(settings.DB_RETRY_AFTER_SECONDS)},
                    ),
                    request_id=rid,
                )
            # aicrd answers an unexpected failure as a retryable INTERNAL error, never a page.
            logger.exception("aicrd %s %s failed (request %s)", request.method, request.path, rid)
            return error_response(
                AicrdError("Failed to build recipe", code=INTERNAL), request_id=rid
            )
        response[REQUEST_ID_HEADER] = rid
        return response

    return wrapper


def _ok(value: Any) -> JsonResponse:
    response = JsonResponse(_jsonable(value), safe=False)
    response["Cache-Control"] = CACHE_CONTROL
    return response


def _refuse_v2_only_input(request: HttpRequest, *, route: str, message: str) -> None:
    """``/v1`` rejects explicit profile selection and Slurm accounting input (ADR-015)."""
    if "profile" in request.GET:
        raise AicrdError(
            message,
            details={"error": f"[INVALID_REQUEST] profile selection is available only on {route}"},
        )
    if "slurmAccountingMode" in request.GET:
        raise AicrdError("slurmAccountingMode is available only on the /v2 endpoints")


@aicrd_endpoint
def recipe(request: HttpRequest) -> HttpResponse:
    """``GET /v1/recipe?service=…`` or ``POST /v1/recipe`` with a ``RecipeCriteria`` body."""
    invalid = "Invalid recipe criteria"
    try:
        if request.method == "GET":
            _refuse_v2_only_input(request, route="/v2/recipe", message=invalid)
            criteria = criteria_from_query(request.GET)
        else:
            body = read_body(request)
            _refuse_v2_only_input(request, route="/v2/recipe", message=invalid)
            document = parse_body(
                body,
                request.content_type or "",
                default="json",
                empty_message="request body is empty",
            )
            criteria = criteria_from_recipe_criteria(document)
    except InputError as exc:
        raise AicrdError(invalid, details={"error": str(exc)}) from exc
    resolution = resolve_criteria(criteria, invalid_message=invalid, legacy_route="/v2/recipe")
    return _ok(resolution.doc)


@aicrd_endpoint
def query(request: HttpRequest) -> HttpResponse:
    """``GET /v1/query?…&selector=…`` or ``POST /v1/query`` with a ``QueryRequest`` body.

    The value at ``selector`` in the hydrated recipe; an empty selector is the whole recipe.
    """
    if request.method == "GET":
        criteria, selector, invalid = _query_from_parameters(request)
    else:
        criteria, selector, invalid = _query_from_body(request)
    resolution = resolve_criteria(criteria, invalid_message=invalid, legacy_route="/v2/query")
    hydrated = hydration.hydrate(
        resolution.doc, read=values_reader(resolution.catalog, resolution.doc)
    )
    try:
        selected = hydration.select(hydrated, selector)
    except hydration.SelectorNotFound as exc:
        raise AicrdError(
            "Selector path not found",
            code=NOT_FOUND,
            details={"selector": selector, "error": f"[NOT_FOUND] {exc}"},
        ) from exc
    return _ok(selected)


def _query_from_parameters(request: HttpRequest) -> tuple[CriteriaInput, str, str]:
    """GET: the selector is required (an empty one is allowed)."""
    invalid = "Invalid query criteria"
    _refuse_v2_only_input(request, route="/v2/query", message=invalid)
    if "selector" not in request.GET:
        raise AicrdError(
            invalid, details={"error": "[INVALID_REQUEST] selector is required on /v1/query"}
        )
    try:
        criteria = criteria_from_query(request.GET)
    except InputError as exc:
        raise AicrdError(invalid, details={"error": str(exc)}) from exc
    return criteria, request.GET.getlist("selector")[0], invalid


def _query_from_body(request: HttpRequest) -> tuple[CriteriaInput, str, str]:
    """POST: a ``QueryRequest``; without a selector the whole recipe is returned."""
    body = read_body(request)
    _refuse_v2_only_input(request, route="/v2/query", message="Invalid query criteria")
    try:
        document = parse_body(
            body,
            request.content_type or "",
            default="yaml",
            empty_message="request body cannot be empty",
        )
        wanted = query_from_body(document)
    except InputError as exc:
        raise AicrdError("Invalid query request body", details={"error": str(exc)}) from exc
    if wanted.criteria is None:
        raise AicrdError("Recipe criteria cannot be empty")
    return wanted.criteria, wanted.selector, "Invalid criteria in request body"


def _jsonable(value: Any) -> Any:
    """What Go's encoding/json would write for a yaml.v3-decoded value (string map keys,
    RFC 3339 times); a non-finite float, which Go cannot encode, becomes ``null``."""
    if isinstance(value, dict):
        return {_key(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(item) for item in value]
    if isinstance(value, datetime | date):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def _key(key: Any) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    return str(key)
