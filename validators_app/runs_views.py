"""The run pages: the list, one run updating live (htmx polling), cancel, and the start form
posted from a recipe page ("Validate on…").

Thin views: reads through ``ValidationRun`` QuerySets, writes through ``services.runs``.
Reading is public; starting and cancelling need the maintainer role
(``evidence_app.permissions``), checked here for htmx requests too.
"""

from __future__ import annotations

from typing import Any

from django.core.paginator import Paginator
from django.db.models import Prefetch
from django.http import Http404, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe
from django.views.decorators.vary import vary_on_headers

from aicr_site.lib.htmx import HtmxHttpRequest, wants_partial
from recipes_app.models import Recipe
from validators_app.clusters_views import _refuse, can_manage
from validators_app.models import CheckRun, CheckStatus, Cluster, RunStatus, ValidationRun
from validators_app.services import run_images, runs
from validators_app.services.publication import run_contribution
from validators_app.services.run_progress import run_progress

PAGE_SIZE = 50
LIVE_TARGET = "run-live"
POLL_SECONDS = 2
NOSCRIPT_REFRESH_SECONDS = 5  # a whole page each time: less often than the htmx poll
LIVE_LOG_LINES = 40
PAGE_LOG_LINES = 200


def _run_or_404(pk: int, *, with_logs: bool = False) -> ValidationRun:
    """The run and its checks; their logs (up to ~0.5 MB each) only when the page shows them."""
    check_rows = CheckRun.objects.order_by("position")
    checks = Prefetch("checks", queryset=check_rows if with_logs else check_rows.defer("stdout"))
    run = (
        ValidationRun.objects.select_related(
            "cluster", "recipe", "recipe__catalog", "evidence", "evidence__signer"
        )
        .defer("ctrf", "phase_reports", "snapshot_yaml", "cluster__kubeconfig_encrypted")
        .prefetch_related(checks)
        .filter(pk=pk)
        .first()
    )
    if run is None:
        raise Http404("No such validation run.")
    return run


@require_safe
def run_list(request: HtmxHttpRequest) -> HttpResponse:
    status = request.GET.get("status", "")
    runs_qs = ValidationRun.objects.for_listing()
    if status in RunStatus.values:
        runs_qs = runs_qs.filter(status=status)
    page = Paginator(runs_qs, PAGE_SIZE).get_page(request.GET.get("page"))
    context = {"page": page, "status": status, "statuses": RunStatus.values}
    return render(request, "validators_app/runs/list.html", context)


@require_safe
@vary_on_headers("HX-Request", "HX-Target", "HX-History-Restore-Request")
def run_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    partial = wants_partial(request, target=LIVE_TARGET)
    run = _run_or_404(pk)
    if not partial and not run.is_active:
        run = _run_or_404(pk, with_logs=True)  # the finished page lists every check's log
    context = _detail_context(request, run)
    if partial:
        response = render(request, "validators_app/runs/detail.html#live", context)
        if not run.is_active:
            # The page was polling an active run that has now ended: reload it once, so the
            # per-check logs, the evidence link and the CTRF download appear (no more polls).
            response["HX-Refresh"] = "true"
        return response
    return render(request, "validators_app/runs/detail.html", context)


def _detail_context(request: HtmxHttpRequest, run: ValidationRun) -> dict[str, Any]:
    checks = list(run.checks.all())
    # The log tail of the check that finished last (one row's log, not every check's).
    latest = (
        run.checks.exclude(status__in=(CheckStatus.PENDING, CheckStatus.RUNNING))
        .exclude(stdout=[])
        .order_by("-finished_at", "-position")
        .only("pk", "name", "stdout")
        .first()
        if run.is_active
        else None
    )
    return {
        "run": run,
        "checks": checks,
        "images": run_images.images_ran(run),
        "progress": run_progress(run, checks),
        "poll_seconds": POLL_SECONDS,
        "noscript_refresh_seconds": NOSCRIPT_REFRESH_SECONDS,
        "counts": {s: sum(c.status == s for c in checks) for s in CheckStatus.values},
        "latest_log_check": latest,
        "latest_log": runs.log_tail(latest, LIVE_LOG_LINES) if latest else [],
        "page_log_lines": PAGE_LOG_LINES,
        "can_cancel": run.is_cancellable and not run.cancel_requested and can_manage(request.user),
        "contribution": None if run.is_active else run_contribution(run),
    }


@require_POST
def run_cancel(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    if not can_manage(request.user):
        return _refuse(request, "Only a maintainer can cancel a validation run.")
    run = _run_or_404(pk)
    try:
        runs.run_cancel(run=run, by=request.user)
    except runs.RunCancelError as exc:  # it had finished: say so rather than pretend
        context = {"run": run, "error": exc.message}
        return render(request, "validators_app/runs/cancel_refused.html", context, status=409)
    return HttpResponseRedirect(reverse("runs:detail", args=[run.pk]))


@require_POST
def run_start(request: HtmxHttpRequest) -> HttpResponse:
    """The "Validate on…" form of a recipe page: a cluster and phases, for maintainers."""
    if not can_manage(request.user):
        return _refuse(request, "Only a maintainer can start a validation run.")
    recipe_name = str(request.POST.get("recipe", ""))[:200]
    cluster_pk = _int(request.POST.get("cluster"))
    cluster = Cluster.objects.filter(pk=cluster_pk).first() if cluster_pk is not None else None
    phases = request.POST.getlist("phases") or None
    known = Recipe.objects.current().filter(name=recipe_name).exists()
    context: dict[str, Any] = {"recipe_name": recipe_name if known else "", "active": None}
    if cluster is None:
        context["error"] = "Choose a registered cluster."
        return render(request, "validators_app/runs/start_error.html", context, status=400)
    try:
        run = runs.run_start(
            cluster=cluster, recipe_name=recipe_name, phases=phases, by=request.user
        )
    except runs.RunStartError as exc:
        context.update(error=exc.message, active=exc.active_run)
        status = 409 if exc.code == "conflict" else 400
        return render(request, "validators_app/runs/start_error.html", context, status=status)
    return HttpResponseRedirect(reverse("runs:detail", args=[run.pk]))


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
