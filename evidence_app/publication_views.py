"""AICR dashboard data at stable URLs (``/aicr/data/index.json``,
``/aicr/data/series/<recipe>.json``), so AICR's own dashboard front end can read this site.
Public, like the evidence lists; ``ETag`` is the sha256 of the bytes (``If-None-Match`` → 304)."""

from __future__ import annotations

import hashlib

from django.http import HttpRequest, HttpResponse, HttpResponseNotModified, JsonResponse
from django.views.decorators.http import require_safe

from evidence_app.exports.publication import publication_current

CACHE_CONTROL = "public, max-age=60"


def _json_bytes(request: HttpRequest, data: bytes) -> HttpResponse:
    etag = f'"{hashlib.sha256(data).hexdigest()}"'
    if etag in request.headers.get("If-None-Match", ""):
        response: HttpResponse = HttpResponseNotModified()
    else:
        response = HttpResponse(data, content_type="application/json")
    response["ETag"] = etag
    response["Cache-Control"] = CACHE_CONTROL
    response["Access-Control-Allow-Origin"] = "*"  # a dashboard served elsewhere reads it
    response["X-Content-Type-Options"] = "nosniff"
    return response


@require_safe
def dashboard_index(request: HttpRequest) -> HttpResponse:
    return _json_bytes(request, publication_current().index)


@require_safe
def dashboard_series(request: HttpRequest, name: str) -> HttpResponse:
    data = publication_current().series.get(name)
    if data is None:
        return JsonResponse(
            {"detail": f"No series for recipe {name[:200]!r}: no published evidence."},
            status=404,
        )
    return _json_bytes(request, data)
