"""The evidence pages: list, one piece of evidence (with withdrawal), two compared, upload
(post/redirect/get to the upload's own result page), and a signer.

Thin views: read through ``selectors``, ``evidence_page`` and ``signer_page``, write through
``services``. Reading is public; uploading needs the contributor or maintainer role;
withdrawing needs the maintainer role or to be the contributor who uploaded it (roles:
``evidence_app.permissions``; ``is_staff`` grants none). Both are checked here, for htmx
partials too (a client can ask for any partial).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpResponse, HttpResponseRedirect
from django.middleware.csrf import CsrfViewMiddleware
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods, require_safe
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import push_url

from aicr_site.lib.htmx import HtmxHttpRequest, wants_partial
from evidence_app import (
    compare,
    evidence_page,
    fetch_steps,
    list_filters,
    permissions,
    selectors,
    signer_listing,
    signer_page,
    upload_results,
)
from evidence_app.forms import EvidenceUploadForm, WithdrawForm
from evidence_app.models import Evidence, UploadLog
from evidence_app.services import ingest, oci, pointers, withdrawal
from evidence_app.upload_status import http_status_of

# --- access --------------------------------------------------------------------------------


def _evidence_or_404(pk: int) -> Evidence:
    evidence = selectors.evidence_get(pk=pk)
    if evidence is None:
        raise Http404("No such evidence.")
    return evidence


def _refuse(request: HtmxHttpRequest, message: str) -> HttpResponse:
    """Sign-in for an anonymous full-page request; 403 otherwise (htmx included)."""
    if not request.user.is_authenticated and not request.htmx:
        return redirect_to_login(request.get_full_path())
    return render(request, "evidence_app/forbidden.html", {"message": message}, status=403)


# --- pages ---------------------------------------------------------------------------------


@require_safe
@vary_on_headers("HX-Request", "HX-Target", "HX-History-Restore-Request")
def evidence_list(request: HtmxHttpRequest) -> HttpResponse:
    suggest = request.GET.get("suggest")
    if suggest in list_filters.TYPED:
        # The typed filter field's datalist, fetched as one types (list_filters.suggestions).
        typed = request.GET.get(f"{suggest}{list_filters.OTHER_SUFFIX}", "")
        found = list_filters.suggestions(suggest, typed)
        return render(
            request, "evidence_app/list.html#suggestions", {"name": suggest, "suggestions": found}
        )
    listing = selectors.evidence_listing(params=request.GET, page_number=request.GET.get("page"))
    context = {
        "listing": listing,
        "page": listing.page,
        "can_export": permissions.can_export(request.user),
    }
    status = 400 if listing.filters.errors else 200
    if wants_partial(request, target="evidence-results"):
        response = render(request, "evidence_app/list.html#results", context, status=status)
        return push_url(response, request.get_full_path())
    return render(request, "evidence_app/list.html", context, status=status)


@require_safe
def evidence_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    evidence = _evidence_or_404(pk)
    # Offered only while it is not withdrawn yet (``permissions`` says who may, not when).
    allowed = evidence.withdrawn_at is None and permissions.can_withdraw(request.user, evidence)
    page = evidence_page.evidence_page(evidence=evidence)
    context = {
        "page": page,
        "evidence": evidence,
        "can_withdraw": allowed,
        "pointer_exportable": pointers.pointer_exportable(evidence),
        "form": WithdrawForm(),
        "compare_candidates": [
            c
            for c in compare.compare_candidates(recipe_name=evidence.recipe_name)
            if c.pk != evidence.pk
        ],
        "fetch": "\n".join(
            fetch_steps.fetch_lines(evidence, base_url=request.build_absolute_uri("/")[:-1])
        )
        if page.commands
        else "",
        "without_cosign": [
            evidence_page.CommandLine(tool, text, "")
            for tool, text in fetch_steps.without_cosign(evidence)
        ]
        if page.commands
        else [],
    }
    return render(request, "evidence_app/detail.html", context)


_COMPARE_STATUS = {"bad-id": 400, "not-found": 404, "different-recipes": 400}


@require_safe
def evidence_compare(request: HtmxHttpRequest) -> HttpResponse:
    """``?a=<id>&b=<id>``: two records of one recipe side by side; ``?a=<id>`` alone: the
    picker for the second one."""
    context: dict[str, Any] = {"a_id": None, "b_id": None}
    try:
        a_id = compare.parse_id(request.GET.get("a"), parameter="a")
        context["a_id"] = a_id
        if not request.GET.get("b"):
            evidence = compare.compare_first(a_id=a_id)
            context["recipe_name"] = evidence.recipe_name
            context["candidates"] = compare.compare_candidates(
                recipe_name=evidence.recipe_name, chosen=[evidence]
            )
            return render(request, "evidence_app/compare.html", context)
        b_id = compare.parse_id(request.GET.get("b"), parameter="b")
        context["b_id"] = b_id
        comparison = compare.evidence_compare(a_id=a_id, b_id=b_id)
    except compare.CompareError as exc:
        context["error"] = exc.message
        return render(
            request, "evidence_app/compare.html", context, status=_COMPARE_STATUS[exc.kind]
        )
    recipe_name = comparison.a.evidence.recipe_name
    context["comparison"] = comparison
    context["recipe_name"] = recipe_name
    context["candidates"] = compare.compare_candidates(
        recipe_name=recipe_name, chosen=[comparison.a.evidence, comparison.b.evidence]
    )
    return render(request, "evidence_app/compare.html", context)


@require_http_methods(["GET", "HEAD", "POST"])
def evidence_withdraw(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    evidence = _evidence_or_404(pk)
    if evidence.withdrawn_at is not None and request.user.is_authenticated:
        return _refuse(request, "This evidence is already withdrawn.")
    if not permissions.can_withdraw(request.user, evidence):
        return _refuse(request, "Only a maintainer or its uploader can withdraw evidence.")
    form = WithdrawForm(request.POST if request.method == "POST" else None)
    if form.is_bound and form.is_valid():
        try:
            withdrawal.evidence_withdraw(
                evidence=evidence,
                by=request.user,
                roles=permissions.roles_of(request.user),
                reason=form.cleaned_data["reason"],
            )
        except withdrawal.WithdrawalError as exc:
            if exc.code != "reason-required":  # lost a race: withdrawn meanwhile
                return _refuse(request, exc.message)
            form.add_error("reason", exc.message)
        else:
            # The whole page changes (labels, staleness): post/redirect/get to it.
            return HttpResponseRedirect(reverse("evidence:detail", args=[evidence.pk]))
    status = 400 if form.is_bound else 200
    context = {"evidence": evidence, "form": form, "can_withdraw": True}
    return render(request, "evidence_app/withdraw.html", context, status=status)


def _csrf_refusal(request: HtmxHttpRequest) -> HttpResponse | None:
    """The CSRF check the middleware skipped for ``evidence_new`` (run after the size check)."""
    check = CsrfViewMiddleware(lambda _request: HttpResponse())
    check.process_request(request)
    # No view passed: the exempt view's own ``csrf_exempt`` must not excuse this check (Django
    # reads the flag with getattr, so None is fine; the stubs want a callable).
    return check.process_view(request, None, (), {})  # type: ignore[arg-type]


def _too_large(request: HtmxHttpRequest) -> HttpResponse | None:
    """413 when ``Content-Length`` says the body is over the limit — before any of it is read."""
    result = ingest.refuse_if_too_large(
        content_length=request.META.get("CONTENT_LENGTH"), user=request.user, channel="form"
    )
    if result is None:
        return None
    context = {
        "verdict": result.verdict,
        "failed_step": result.failed_step,
        "transcript": result.transcript,
        "reason": result.reason,
        "created": False,
        "evidence": None,
        "filename": "",
        "stale": [],
    }
    response = render(
        request, "evidence_app/result.html", context, status=http_status_of(result.outcome)
    )
    response["Connection"] = "close"  # the unread body is not drained
    return response


# CSRF is checked by hand after the size check: the middleware would read (parse) the whole
# body first to find the token.
@csrf_exempt
@require_http_methods(["GET", "HEAD", "POST"])
def evidence_new(request: HtmxHttpRequest) -> HttpResponse:
    if not permissions.can_upload(request.user):
        return _refuse(request, "Uploading evidence needs the contributor or maintainer role.")
    if request.method == "POST":
        refusal = _too_large(request) or _csrf_refusal(request)
        if refusal is not None:
            return refusal
    if request.method != "POST":
        return render(request, "evidence_app/new.html", {"form": EvidenceUploadForm()})
    form = EvidenceUploadForm(request.POST, request.FILES)
    if not form.is_valid():
        return render(request, "evidence_app/new.html", {"form": form}, status=400)
    bundle = form.cleaned_data["bundle"]
    if bundle is None:
        upload = oci.oci_upload_request(oci_ref=form.cleaned_data["oci_ref"], user=request.user)
        return _to_result(upload)
    artifact = form.cleaned_data["artifact"]
    result = ingest.evidence_ingest(
        data=bundle.data,
        artifact=artifact.data if artifact is not None else None,
        filename=bundle.name,
        user=request.user,
        channel="form",
    )
    if result.unavailable or result.upload is None:
        # Nothing was decided: the answer stays at the POST, so sending it again is the retry.
        context = {
            "verdict": result.verdict,
            "failed_step": result.failed_step,
            "transcript": result.transcript,
            "reason": result.reason,
            "retry_after": result.retry_after,
            "filename": bundle.name,
        }
        response = render(
            request, "evidence_app/result.html", context, status=http_status_of(result.outcome)
        )
        if result.retry_after is not None:
            response["Retry-After"] = str(result.retry_after)
        return response
    return _to_result(result.upload)


def _to_result(upload: UploadLog) -> HttpResponse:
    """303 to the upload's own result page: a reload reads the outcome, never re-sends."""
    return HttpResponseRedirect(reverse("evidence:upload", args=[upload.pk]), status=303)


@require_safe
def upload_result(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """An upload's outcome, for the user who uploaded it (404 for anyone else)."""
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    upload = upload_results.upload_for_uploader(pk=pk, user=request.user)
    if upload is None:
        raise Http404("No upload of yours with this number.")
    return render(request, "evidence_app/result.html", upload_results.result_context(upload))


@require_safe
def pointer_list(request: HtmxHttpRequest) -> HttpResponse:
    listing = selectors.pointer_listing(
        state=request.GET.get("state", ""), page_number=request.GET.get("page")
    )
    return render(request, "evidence_app/pointers.html", {"listing": listing})


@require_safe
def evidence_pointer(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The AICR pointer file for this evidence, named as AICR's repository expects it."""
    evidence = _evidence_or_404(pk)
    try:
        exported = pointers.pointer_export(evidence=evidence)
    except pointers.PointerExportError as exc:
        return HttpResponse(
            f"No pointer for evidence #{pk}: {exc}\n", status=404, content_type="text/plain"
        )
    response = HttpResponse(exported.text, content_type="application/yaml; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{exported.path.rsplit("/", 1)[1]}"'
    response["X-AICR-Pointer-Path"] = exported.path
    return response


@require_safe
def signer_list(request: HtmxHttpRequest) -> HttpResponse:
    page = signer_listing.signer_index(page_number=request.GET.get("page"))
    return render(request, "evidence_app/signers.html", {"signers": page})


@require_safe
def signer_key(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """A key-signed signer's registered public key, as the ``key.pub`` its verify command reads."""
    found = signer_listing.signer_public_key(slug=slug)
    if found is None:
        raise Http404("No key-signed signer with this slug.")
    _, pem = found
    response = HttpResponse(pem, content_type="application/x-pem-file")
    response["Content-Disposition"] = 'attachment; filename="key.pub"'
    return response


@require_safe
@vary_on_headers("HX-Request", "HX-Target", "HX-History-Restore-Request")
def signer_detail(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    signer = signer_page.signer_get(slug=slug)
    if signer is None:
        raise Http404("No such signer.")
    page = signer_page.signer_page(signer=signer, page_number=request.GET.get("page"))
    context = {"signer": signer, "page": page, "evidence_page": page.page}
    if wants_partial(request, target="signer-evidence"):
        response = render(request, "evidence_app/signer.html#evidence", context)
        return push_url(response, request.get_full_path())
    return render(request, "evidence_app/signer.html", context)
