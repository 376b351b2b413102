"""``/qualifications/``: the table as a plain GET page (sorting, filtering and paging are
links and a form, so it works without JavaScript). Public, like the evidence it lists."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from .listing import qualification_listing


@require_safe
def qualification_list(request: HttpRequest) -> HttpResponse:
    listing = qualification_listing(params=request.GET, page_number=request.GET.get("page"))
    return render(
        request,
        "evidence_app/qualifications.html",
        {"listing": listing},
        status=400 if listing.errors else 200,
    )
