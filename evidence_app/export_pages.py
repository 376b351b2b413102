"""The export pages: ``/exports/`` (ask for an export of the records a filter selects, and your
recent ones) and ``/exports/<id>/`` (its progress, polled by htmx, then the download link).
Auditors and maintainers; each sees only their own exports (anyone else's is a 404)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import Http404, HttpResponse, HttpResponseRedirect
from django.http.response import HttpResponseBase
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_safe

from aicr_site.lib.htmx import HtmxHttpRequest, wants_partial
from evidence_app import permissions
from evidence_app.api.export_jobs import export_download
from evidence_app.exports.jobs import ExportRequestError, export_filters_clean, export_job_request
from evidence_app.models import ExportFormat, ExportJob, ExportState
from evidence_app.views import _refuse

LIVE_TARGET = "export-live"
POLL_SECONDS = 1
NOSCRIPT_REFRESH_SECONDS = 5  # a whole page each time: less often than the htmx poll
RECENT = 20
REFUSAL = "Exports are for auditors and maintainers."


def _may_export(request: HtmxHttpRequest) -> bool:
    return permissions.can_export(request.user)


def _own_job_or_404(request: HtmxHttpRequest, pk: int) -> ExportJob:
    job = ExportJob.objects.filter(pk=pk, requested_by_id=request.user.pk).first()
    if job is None:
        raise Http404("No export of yours with this number.")
    return job


def _filters_of(query: Any) -> tuple[dict[str, str], str]:
    """The evidence filters in ``query`` (a page's query string or form), and the refusal
    that names a bad one ("" when they are fine)."""
    names = set(query) - {"format", "csrfmiddlewaretoken"}
    try:
        return export_filters_clean({name: query.get(name, "") for name in names}), ""
    except ExportRequestError as exc:
        return {}, str(exc)


@require_http_methods(["GET", "HEAD", "POST"])
def export_list(request: HtmxHttpRequest) -> HttpResponseBase:
    if not _may_export(request):
        return _refuse(request, REFUSAL)
    source = request.POST if request.method == "POST" else request.GET
    filters, problem = _filters_of(source)
    status = 400 if problem else 200
    chosen = source.get("format", ExportFormat.NDJSON)
    if request.method == "POST" and not problem:
        try:
            job = export_job_request(
                user=request.user,
                format=chosen,
                filters=filters,
                site=request.build_absolute_uri("/"),
            )
        except ExportRequestError as exc:
            problem, status = str(exc), exc.status
        else:
            return HttpResponseRedirect(reverse("evidence:export", args=[job.pk]), status=303)
    context = {
        "filters": filters,
        "problem": problem,
        "formats": ExportFormat.choices,
        "chosen": chosen if chosen in ExportFormat.values else ExportFormat.NDJSON,
        "jobs": ExportJob.objects.filter(requested_by_id=request.user.pk)[:RECENT],
        "keep_hours": f"{settings.EXPORT_KEEP_HOURS:g}",
    }
    return render(request, "evidence_app/exports.html", context, status=status)


@require_safe
def export_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    if not _may_export(request):
        return _refuse(request, REFUSAL)
    job = _own_job_or_404(request, pk)
    context = {
        "job": job,
        "poll_seconds": POLL_SECONDS,
        "noscript_refresh_seconds": NOSCRIPT_REFRESH_SECONDS,
        "percent": _percent(job),
    }
    if wants_partial(request, target=LIVE_TARGET):
        response = render(request, "evidence_app/export.html#live", context)
        if not job.is_active:
            response["HX-Refresh"] = "true"  # finished: the whole page once, then no polls
        return response
    return render(request, "evidence_app/export.html", context)


@require_safe
def export_file(request: HtmxHttpRequest, pk: int) -> HttpResponseBase:
    if not _may_export(request):
        return _refuse(request, REFUSAL)
    job = _own_job_or_404(request, pk)
    if job.state != ExportState.DONE:
        message = f"Export #{job.pk} is {job.get_state_display().lower()}: nothing to download."
        return render(request, "error.html", {"title": "Not ready", "message": message}, status=409)
    return export_download(job)


def _percent(job: ExportJob) -> int:
    if job.state == ExportState.DONE:
        return 100
    if not job.total:
        return 0
    return min(99, job.done * 100 // job.total)
