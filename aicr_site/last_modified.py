"""``Last-Modified`` on the API's lists and details, beside their ``ETag``.

No column holds when an answer last changed: an evidence record's answer moves with its
withdrawal, its signer's class, a newer AICR version elsewhere, a catalog import and the clock
(staleness); a recipe's with its consensus; a run's with every check it runs. So the time is
the one that is known for sure: when this site first sent the current bytes of that answer.
Per answer (path, query, ``Accept``, token and signed-in user, hashed) a cache keeps the ETag
sent last and since when; an answer whose ETag differs restarts the clock. That cache is each
process's own, bounded memory (``CACHES["last-modified"]``), never the shared Redis: anyone can
invent query strings, and each is an answer; a process that has not seen an answer yet, or has
culled it, only sends a later time. A client's ``If-Modified-Since``
therefore gets a 304 only while the bytes it holds are still the answer (the time is sent from
the second after it, see ``last_modified``); a lost cache entry or two processes racing only
make the time later (a 200 where a 304 could have been), never earlier.
``ConditionalGetMiddleware`` (next, outward) answers the conditions: second resolution (HTTP
dates), and ``If-None-Match`` wins when both are sent (RFC 9110 13.2.2).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

from django.core.cache import caches
from django.http import HttpRequest, HttpResponse
from django.utils.cache import set_response_etag
from django.utils.http import http_date

API_PREFIX = "/api/v1/"
CACHE_ALIAS = "last-modified"


def _answer_key(request: HttpRequest) -> str:
    token = request.headers.get("Authorization", "")
    accept = request.headers.get("Accept", "")
    user = getattr(request, "user", None)
    signed_in = str(user.pk) if user is not None and user.is_authenticated else ""
    identity = "\0".join((request.get_full_path(), accept, token, signed_in))
    return "last-modified:" + hashlib.sha256(identity.encode()).hexdigest()


def last_modified(request: HttpRequest, etag: str) -> int | None:
    """When this answer's bytes (``etag``) were first sent, in whole seconds since the epoch;
    None within that second: bytes that replace them in the same second would have the same
    time, and a client holding these would be told nothing changed."""
    key = _answer_key(request)
    now = int(time.time())
    cache = caches[CACHE_ALIAS]
    seen = cache.get(key)
    if isinstance(seen, tuple) and seen[0] == etag:
        since = int(seen[1])
        return since if since < now else None
    cache.set(key, (etag, now))
    return None


class LastModifiedMiddleware:
    """Sets ``Last-Modified`` on successful GET/HEAD answers of the API (not streamed ones:
    exports have no ETag to compare)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            request.method in ("GET", "HEAD")
            and request.path.startswith(API_PREFIX)
            and response.status_code == 200
            and not response.streaming
            and not response.has_header("Last-Modified")
        ):
            if not response.has_header("ETag"):
                set_response_etag(response)
            since = (
                last_modified(request, response["ETag"]) if response.has_header("ETag") else None
            )
            if since is not None:
                response["Last-Modified"] = http_date(since)
        return response
