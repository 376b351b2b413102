"""AICR dashboard data at stable URLs (``/aicr/data/index.json``,
``/aicr/data/series/<recipe>.json``), so AICR's own dashboard front end can read this site, and
``/aicr/data/`` listing what is there. Demo and simulated evidence is left out unless
``?include=demo,simulated`` asks for it; ``labels.json`` (same option) names the sources it
was published under (``exports.publication``). Public, like the evidence lists; ``ETag`` is the
sha256 of the bytes (``If-None-Match`` → 304)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from urllib.parse import quote

from django.http import HttpRequest, HttpResponse, HttpResponseNotModified, JsonResponse
from django.urls import reverse
from django.views.decorators.http import require_safe

from evidence_app.exports.publication import (
    SAMPLE_KINDS,
    IncludeError,
    Publication,
    include_parse,
    publication_current,
)

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


def _publication(request: HttpRequest) -> Publication | JsonResponse:
    """The publication ``?include=`` asks for, or the 400 naming the bad value."""
    try:
        include = include_parse(request.GET.get("include"))
    except IncludeError as exc:
        return JsonResponse({"detail": str(exc)}, status=400)
    return publication_current(include)


def _with_include(url: str, publication: Publication) -> str:
    return f"{url}?include={','.join(sorted(publication.include))}" if publication.include else url


@require_safe
def dashboard_listing(request: HttpRequest) -> HttpResponse:
    """``/aicr/data/``: every document there, what it holds, and what was left out."""
    publication = _publication(request)
    if isinstance(publication, JsonResponse):
        return publication
    series = [
        {
            "recipe": name,
            "url": _with_include(reverse("aicr-dashboard:series", args=[name]), publication),
        }
        for name in sorted(publication.series)
    ]
    listing = {
        "schema": "aicr-dashboard-site-listing/v1",
        "index": _with_include(reverse("aicr-dashboard:index"), publication),
        "labels": _with_include(reverse("aicr-dashboard:labels"), publication),
        "runs": publication.runs,
        "include": sorted(publication.include),
        "leftOut": publication.left_out,
        "includeOption": f"?include={quote(','.join(SAMPLE_KINDS), safe=',')} adds demo and "
        "simulated runs as zero-weight sources named in labels.json",
        "series": series,
    }
    response = JsonResponse(listing, json_dumps_params={"indent": 2})
    response["Cache-Control"] = CACHE_CONTROL
    response["Access-Control-Allow-Origin"] = "*"
    return response


def _document(
    request: HttpRequest,
    pick: Callable[[Publication], bytes | None],
    missing: str = "No such document.",
) -> HttpResponse:
    publication = _publication(request)
    if isinstance(publication, JsonResponse):
        return publication
    data = pick(publication)
    if data is None:
        return JsonResponse({"detail": missing}, status=404)
    return _json_bytes(request, data)


@require_safe
def dashboard_index(request: HttpRequest) -> HttpResponse:
    return _document(request, lambda publication: publication.index)


@require_safe
def dashboard_labels(request: HttpRequest) -> HttpResponse:
    return _document(request, lambda publication: publication.labels)


@require_safe
def dashboard_series(request: HttpRequest, name: str) -> HttpResponse:
    return _document(
        request,
        lambda publication: publication.series.get(name),
        missing=f"No series for recipe {name[:200]!r}: no published evidence.",
    )
