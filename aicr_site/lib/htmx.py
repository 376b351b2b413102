"""htmx request typing and the one rule for "send only a partial" shared by every page."""

from __future__ import annotations

from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


def wants_partial(request: HtmxHttpRequest, *, target: str) -> bool:
    """An htmx swap of ``#target``; a history restore still gets the whole page."""
    htmx = request.htmx
    return bool(htmx) and not htmx.history_restore_request and htmx.target == target
