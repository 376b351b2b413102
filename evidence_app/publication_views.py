"""AICR dashboard data at stable URLs (``/aicr/data/index.json``,
``/aicr/data/series/<recipe>.json``), so AICR's own dashboard front end can read this site, and
``/aicr/data/`` listing what is there. Demo and simulated evidence is left out unless
``?include=demo,simulated`` asks for it; ``labels.json`` (same option) names the sources it
was published under (``exports.publication``). Public, like the evidence lists; ``ETag`` is the
sha256 of the bytes (``If-None-Match`` → 304). Every answer is the last build a Celery task
stored (``exports.artefact``), never built by the request: ``X-Publication-Built-At`` says
when, ``X-Publication-Pending`` whether the evidence has changed since (a rebuild is queued),
and the listing says both in its body."""

from __future__ import annotations

from urllib.parse import quote

from django.http import HttpRequest, HttpResponse, HttpResponseNotModified, JsonResponse
from django.urls import reverse
from django.views.decorators.http import require_safe

from evidence_app.exports import artefact
from evidence_app.exports.publication import SAMPLE_KINDS, IncludeError, include_parse
from evidence_app.models import PublicationBuild

CACHE_CONTROL = "public, max-age=60"
RETRY_AFTER = "10"


def _iso(build: PublicationBuild) -> str:
    return build.built_at.isoformat().replace("+00:00", "Z")


def _state_headers(response: HttpResponse, served: artefact.Served) -> HttpResponse:
    """When the served files were built, and whether the evidence has moved on since."""
    if served.build is not None:
        response["X-Publication-Built-At"] = _iso(served.build)
    response["X-Publication-Pending"] = "true" if served.pending else "false"
    response["Access-Control-Allow-Origin"] = "*"  # a dashboard served elsewhere reads it
    return response


def _json_bytes(request: HttpRequest, data: bytes, sha256: str) -> HttpResponse:
    etag = f'"{sha256}"'
    if etag in request.headers.get("If-None-Match", ""):
        response: HttpResponse = HttpResponseNotModified()
    else:
        response = HttpResponse(data, content_type="application/json")
    response["ETag"] = etag
    response["Cache-Control"] = CACHE_CONTROL
    response["X-Content-Type-Options"] = "nosniff"
    return response


def _served(
    request: HttpRequest, name: str | None = None
) -> tuple[frozenset[str], artefact.Served] | HttpResponse:
    """The stored build ``?include=`` asks for, the 400 naming a bad value, or the 503 of a
    publication not built yet."""
    try:
        include = include_parse(request.GET.get("include"))
    except IncludeError as exc:
        return JsonResponse({"detail": str(exc)}, status=400)
    served = artefact.served(include, name)
    if served.build is None:
        response = JsonResponse(
            {"detail": "The publication is being built for the first time; try again shortly."},
            status=503,
        )
        response["Retry-After"] = RETRY_AFTER
        return _state_headers(response, served)
    return include, served


def _with_include(url: str, include: frozenset[str]) -> str:
    return f"{url}?include={','.join(sorted(include))}" if include else url


@require_safe
def dashboard_listing(request: HttpRequest) -> HttpResponse:
    """``/aicr/data/``: every document there, what it holds, what was left out, when it was
    built and whether a rebuild is pending."""
    found = _served(request)
    if isinstance(found, HttpResponse):
        return found
    include, served = found
    build = served.build
    assert build is not None  # _served answered 503 otherwise
    series = [
        {
            "recipe": name,
            "url": _with_include(reverse("aicr-dashboard:series", args=[name]), include),
        }
        for name in artefact.series_names(build)
    ]
    listing = {
        "schema": "aicr-dashboard-site-listing/v1",
        "index": _with_include(reverse("aicr-dashboard:index"), include),
        "labels": _with_include(reverse("aicr-dashboard:labels"), include),
        "runs": build.runs,
        "include": sorted(include),
        "leftOut": build.left_out,
        "includeOption": f"?include={quote(','.join(SAMPLE_KINDS), safe=',')} adds demo and "
        "simulated runs as zero-weight sources named in labels.json",
        "builtAt": _iso(build),
        "rebuildPending": served.pending,
        "series": series,
    }
    response = JsonResponse(listing, json_dumps_params={"indent": 2})
    response["Cache-Control"] = CACHE_CONTROL
    return _state_headers(response, served)


def _document(request: HttpRequest, name: str, missing: str = "No such document.") -> HttpResponse:
    found = _served(request, name)
    if isinstance(found, HttpResponse):
        return found
    _, served = found
    document = served.document
    if document is None:
        return _state_headers(JsonResponse({"detail": missing}, status=404), served)
    return _state_headers(_json_bytes(request, bytes(document.body), document.sha256), served)


@require_safe
def dashboard_index(request: HttpRequest) -> HttpResponse:
    return _document(request, artefact.INDEX)


@require_safe
def dashboard_labels(request: HttpRequest) -> HttpResponse:
    return _document(request, artefact.LABELS)


@require_safe
def dashboard_series(request: HttpRequest, name: str) -> HttpResponse:
    return _document(
        request,
        f"series/{name}.json",
        missing=f"No series for recipe {name[:200]!r}: no published evidence.",
    )
