"""``/check/``: "does the evidence cover my cluster?" for a pasted or uploaded snapshot.

The snapshot is checked and forgotten: it is not stored, not logged, and the answer is
rendered only to the person who sent it (``Cache-Control: no-store``). An htmx request gets
the ``#result`` partial; a plain form post the whole page.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from aicr_site.lib.htmx import HtmxHttpRequest, wants_partial

from . import guidance
from .forms import SnapshotCheckForm
from .identity import LABELS
from .service import CheckInputError, CheckResult, check_snapshot
from .snapshot_input import MAX_SNAPSHOT_BYTES

# The form's other fields and multipart framing on top of the snapshot itself.
MAX_BODY_BYTES = MAX_SNAPSHOT_BYTES + 64 * 1024


def _view(result: CheckResult) -> dict[str, Any]:
    """The result as the page shows it: labels instead of keys, both values of a difference,
    the verdict as a sentence with the suggested completions and what to run next."""
    origin = {"snapshot": "from the snapshot", "stated": "stated"}
    evidence = []
    for e in result.evidence:
        unknown = [f"not recorded: {LABELS[k]}" for k in e.not_recorded]
        if e.redacted:
            unknown.append(
                "redacted by AICR's policy (publish with --full to record): "
                + ", ".join(LABELS[k] for k in e.redacted)
            )
        if e.not_in_snapshot:
            unknown.append(
                "not in your snapshot: " + ", ".join(LABELS[k] for k in e.not_in_snapshot)
            )
        evidence.append(
            {
                "id": e.id,
                "signer": e.signer_label,
                "attested_at": e.attested_at,
                "same_recipe": e.same_recipe,
                "exact": e.exact,
                "matches": [LABELS[k] for k in e.matches],
                "differs": [
                    f"{LABELS[k]} {e.values[k]['evidence']} (yours {e.values[k]['snapshot']})"
                    for k in e.differs
                ],
                "unknown": unknown,
            }
        )
    return {
        "criteria": [(d, v, origin[result.criteria_origin[d]]) for d, v in result.criteria.items()],
        "identity": [(LABELS[k], v) for k, v in result.identity.items()],
        "evidence": evidence,
        "sentence": guidance.sentence(result.verdict),
        "completions": guidance.completions(result),
        "next_steps": guidance.next_steps(result),
        "settle": result.settle,
    }


def _render(request: HtmxHttpRequest, context: dict[str, Any], status: int = 200) -> HttpResponse:
    context = {"max_bytes": MAX_SNAPSHOT_BYTES, **context}
    template = "evidence_app/check.html"
    if request.method == "POST" and wants_partial(request, target="result"):
        template += "#result"
    return render(request, template, context, status=status)


def _too_large(request: HtmxHttpRequest) -> HttpResponse | None:
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length <= MAX_BODY_BYTES:
        return None
    error = f"The request is {length:,} bytes; a snapshot may be at most {MAX_SNAPSHOT_BYTES:,}."
    form = SnapshotCheckForm(criteria_values=guidance.criteria_choices())
    response = _render(request, {"form": form, "error": error}, status=413)
    response["Connection"] = "close"  # the unread body is not drained
    return response


# CSRF is checked by hand after the size check: the middleware would parse the whole body first.
@csrf_exempt
@never_cache
@require_http_methods(["GET", "HEAD", "POST"])
def check_page(request: HtmxHttpRequest) -> HttpResponse:
    if request.method != "POST":
        choices = guidance.criteria_choices()
        initial, refused = guidance.prefill(request.GET, choices)
        form = SnapshotCheckForm(initial=initial, criteria_values=choices)
        return _render(request, {"form": form, "prefill_refused": refused})
    refusal = _too_large(request)
    if refusal is None:
        check = CsrfViewMiddleware(lambda _request: HttpResponse())
        check.process_request(request)
        # No view passed: the exempt view's own ``csrf_exempt`` must not excuse this check
        # (Django reads the flag with getattr, so None is fine; the stubs want a callable).
        refusal = check.process_view(request, None, (), {})  # type: ignore[arg-type]
    if refusal is not None:
        return refusal
    form = SnapshotCheckForm(
        request.POST, request.FILES, criteria_values=guidance.criteria_choices()
    )
    if not form.is_valid():
        return _render(request, {"form": form}, status=400)
    try:
        result = check_snapshot(
            form.cleaned_data["snapshot"],
            form.criteria(),
            profile=form.cleaned_data["profile"] or None,
        )
    except CheckInputError as exc:
        return _render(request, {"form": form, "error": str(exc)}, status=400)
    return _render(request, {"form": form, "result": result, "view": _view(result)})
