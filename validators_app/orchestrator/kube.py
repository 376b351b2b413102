"""The Kubernetes REST calls of a run, over the official client's ``ApiClient``, with retries.

Requests go through ``ApiClient.param_serialize``/``call_api`` (the client's own auth, TLS and
connection pool) with JSON dicts in and out, so the bodies are exactly the ones ``plan.py``
renders (server-side apply needs ``application/apply-patch+yaml`` with the object as sent).
Watches use ``kubernetes.watch.Watch``.

Every call retries 429, 5xx and transport errors with exponential backoff, bounded in attempts
and in total time; then ``ApiUnavailable`` carries the reason (the caller decides what it
costs: a check ``other`` while waiting for its Job, the run ``error`` elsewhere, as in AICR).
Between attempts, and every ``RetryPolicy.poll_s`` of a backoff sleep, the retry loop calls the
``between_attempts`` callback the caller gave: the run heartbeats and sees a cancel there, so a
cancel wins over a failing API within one poll instead of after the last attempt. Whatever the
callback raises ends the call unchanged (this module knows nothing of runs or Django).

Answer bodies are read with a byte cap after decoding: ``Content-Encoding: gzip``/``deflate``
is inflated here, bounded in output (``AnswerTooLarge`` names the cap), because the transport
cap (``aicr_site.lib.outbound``) counts bytes on the wire, which a gzip bomb keeps tiny; any
other encoding is refused by name.
"""

from __future__ import annotations

import json
import random
import time
import zlib
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import urllib3
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from aicr_site.lib import outbound

__all__ = [
    "TRANSPORT_FAILURE",
    "AlreadyExists",
    "ApiUnavailable",
    "Kube",
    "KubeError",
    "NotFound",
    "RetryPolicy",
]

_AUTH = ["BearerToken"]
TRANSPORT_FAILURE = "not reachable (connection refused, timed out, dropped or failed TLS)"
_MAX_LOG_BYTES = 32 * 1024 * 1024  # keep the tail of a bigger log (the CTRF keeps 1000 lines)
# Decoded bytes one answer may have when the client does not say (CLUSTER_MAX_ANSWER_BYTES'
# default); a client from ``outbound.kubernetes_api_client`` carries its own ``Limits``.
DEFAULT_MAX_ANSWER_BYTES = 64 * 1024 * 1024
_CHUNK = 1 << 16


class KubeError(RuntimeError):
    """An API call did not give what the run needs (the base of the three below)."""


class ApiUnavailable(KubeError):
    """The API kept failing (or refused for a reason retrying cannot fix); the run errors."""


class NotFound(KubeError, LookupError):
    """404 from the API server."""


class AlreadyExists(KubeError):
    """409 from the API server on create."""


class InvalidAnswer(outbound.OutboundError):
    """A 2xx answer that is not a JSON document this client can use (too deep, not UTF-8, a
    number past Python's digit limit, not JSON): refused, not retried, never echoed."""


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 8
    base_delay_s: float = 0.2
    max_delay_s: float = 5.0
    total_s: float = 60.0
    request_timeout: tuple[float, float] = (10.0, 60.0)  # connect, read
    poll_s: float = 0.25  # longest backoff sleep between two ``between_attempts`` calls


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, ApiException):
        return exc.status == 429 or (exc.status or 0) >= 500 or exc.status == 0
    return isinstance(exc, (urllib3.exceptions.HTTPError, OSError))


def _retry_after(exc: BaseException, cap_s: float) -> float:
    """A 429/503 ``Retry-After`` in seconds (capped), else 0."""
    headers = getattr(exc, "headers", None) if isinstance(exc, ApiException) else None
    try:
        return min(float((headers or {}).get("Retry-After", 0)), cap_s)
    except (TypeError, ValueError):
        return 0.0


def describe(exc: BaseException) -> str:
    """A one-line reason naming the HTTP status or the transport failure."""
    if isinstance(exc, ApiException):
        detail = ""
        try:
            body = json.loads(exc.body or "")
            detail = body.get("message", "") if isinstance(body, dict) else ""
            detail = detail[:500] if isinstance(detail, str) else ""
        except (ValueError, RecursionError):  # a hostile error body: quote its start only
            detail = (exc.body or "")[:200]
        return f"HTTP {exc.status} {exc.reason or ''}".strip() + (f": {detail}" if detail else "")
    if isinstance(exc, outbound.OutboundError):
        return exc.message  # what the site decided (a refused address, a cap), not the peer
    if isinstance(exc, urllib3.exceptions.HTTPError | OSError):
        # One reason class for every transport failure: a run's error must not say whether a
        # port refused, hung or spoke TLS (that would scan ports from the worker).
        return TRANSPORT_FAILURE
    return f"{type(exc).__name__}: {exc}"


class Kube:
    """JSON REST helpers for the handful of resources a run touches.

    ``between_attempts`` (settable: a caller may switch it off for its cleanup) is called
    before every retry and during backoff sleeps; see the module docstring.
    """

    def __init__(
        self,
        api: client.ApiClient,
        retry: RetryPolicy | None = None,
        *,
        between_attempts: Callable[[], None] | None = None,
    ) -> None:
        self.api = api
        self.retry = retry or RetryPolicy()
        self.between_attempts = between_attempts
        limits = getattr(api.rest_client.pool_manager, "limits", None)
        self.max_answer_bytes: int = getattr(limits, "max_answer_bytes", DEFAULT_MAX_ANSWER_BYTES)

    def pause(self, seconds: float) -> None:
        """Sleep ``seconds`` in slices of ``poll_s``, calling ``between_attempts`` before each."""
        until = time.monotonic() + seconds
        while True:
            if self.between_attempts is not None:
                self.between_attempts()
            left = until - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, self.retry.poll_s))

    # --- transport -------------------------------------------------------------------------

    def _once(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        raw: bool = False,
    ) -> Any:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        method, url, headers, body, post = self.api.param_serialize(
            method,
            path,
            query_params=query or [],
            header_params=headers,
            body=body,
            auth_settings=_AUTH,
        )
        resp = self.api.call_api(
            method, url, headers, body, post, _request_timeout=self.retry.request_timeout
        )
        if raw and 200 <= resp.status <= 299:
            return _read_tail(resp.response, self.max_answer_bytes)
        data = _read_whole(resp.response, self.max_answer_bytes)
        if not 200 <= resp.status <= 299:
            exc = ApiException(
                status=resp.status, reason=resp.reason, body=data.decode("utf-8", "replace")
            )
            exc.headers = resp.headers  # Retry-After
            raise exc
        if not data:
            return None
        try:
            return json.loads(data)
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
            raise InvalidAnswer(f"the answer is not usable JSON ({type(exc).__name__})") from None

    def call(self, what: str, method: str, path: str, **kwargs: Any) -> Any:
        """One API call with retries; NotFound for 404, ApiUnavailable when it keeps failing."""
        policy = self.retry
        deadline = time.monotonic() + policy.total_s
        attempt = 0
        while True:
            attempt += 1
            try:
                return self._once(method, path, **kwargs)
            except Exception as exc:
                if isinstance(exc, ApiException) and exc.status == 404:
                    raise NotFound(f"{what}: {describe(exc)}") from exc
                if isinstance(exc, ApiException) and exc.status == 409:
                    raise AlreadyExists(f"{what}: {describe(exc)}") from exc
                if not _retryable(exc):
                    # A refused address, or an answer over its cap or deadline: no retry helps.
                    if isinstance(exc, ApiException | outbound.OutboundError):
                        raise ApiUnavailable(f"{what}: {describe(exc)}") from exc
                    raise
                delay = min(
                    policy.max_delay_s, policy.base_delay_s * 2 ** (attempt - 1)
                ) * random.uniform(0.8, 1.2)  # noqa: S311 - jitter
                delay = max(delay, _retry_after(exc, policy.max_delay_s))
                if attempt >= policy.attempts or time.monotonic() + delay > deadline:
                    raise ApiUnavailable(
                        f"{what}: Kubernetes API still failing after {attempt} attempt(s): "
                        + describe(exc)
                    ) from exc
                self.pause(delay)

    # --- typed-ish helpers ------------------------------------------------------------------

    def get(self, what: str, path: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = self.call(what, "GET", path)
        except NotFound:
            return None
        return found

    def apply(self, what: str, path: str, body: Mapping[str, Any], manager: str = "aicr") -> Any:
        """Server-side apply (PATCH application/apply-patch+yaml, force)."""
        return self.call(
            what,
            "PATCH",
            path,
            query=[("fieldManager", manager), ("force", "true")],
            body=dict(body),
            content_type="application/apply-patch+yaml",
        )

    def create(self, what: str, collection: str, body: Mapping[str, Any]) -> Any:
        return self.call(what, "POST", collection, body=dict(body))

    def replace(self, what: str, path: str, body: Mapping[str, Any]) -> Any:
        return self.call(what, "PUT", path, body=dict(body))

    def merge_patch(self, what: str, path: str, body: Mapping[str, Any]) -> Any:
        return self.call(
            what, "PATCH", path, body=dict(body), content_type="application/merge-patch+json"
        )

    def delete(self, what: str, path: str, *, foreground: bool = False) -> bool:
        """DELETE; False when it was already gone (NotFound is ignored everywhere in AICR)."""
        body = (
            {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Foreground"}
            if foreground
            else None
        )
        try:
            self.call(what, "DELETE", path, body=body)
        except NotFound:
            return False
        return True

    def list(self, what: str, path: str, **selectors: str) -> dict[str, Any]:
        query = [
            (k, v)
            for k, v in (
                ("labelSelector", selectors.get("label")),
                ("fieldSelector", selectors.get("field")),
                ("limit", selectors.get("limit")),
            )
            if v
        ]
        return self.call(what, "GET", path, query=query) or {}

    def log(self, what: str, namespace: str, pod: str, container: str) -> bytes:
        path = f"/api/v1/namespaces/{namespace}/pods/{quote(pod)}/log"
        body: bytes = self.call(what, "GET", path, query=[("container", container)], raw=True)
        return body

    def watch_jobs(
        self, namespace: str, name: str, resource_version: str, timeout_s: int
    ) -> Generator[dict[str, Any]]:
        """Job events by field selector from ``resource_version`` (the client's Watch).

        Events are read through ``event["raw_object"]`` (the JSON as served); only the
        deserializing mode of Watch turns ``ERROR`` events (410 Gone) into ApiException.
        """
        batch = client.BatchV1Api(self.api)
        w = watch.Watch()
        events: Generator[dict[str, Any]] = w.stream(
            batch.list_namespaced_job,
            namespace,
            field_selector=f"metadata.name={name}",
            resource_version=resource_version,
            timeout_seconds=max(1, int(timeout_s)),
            allow_watch_bookmarks=False,
            _request_timeout=(self.retry.request_timeout[0], timeout_s + 10),
        )
        return events


def _decoded(raw: Any, cap: int) -> Iterator[bytes]:
    """The body of urllib3 response ``raw`` in chunks, decoded here (never by urllib3) so that
    its decoded size is bounded: more than ``cap`` decoded bytes is ``AnswerTooLarge``."""
    encoding = (raw.headers.get("Content-Encoding") or "").strip().lower()
    wire = raw.stream(_CHUNK, decode_content=False)
    if encoding in ("", "identity"):
        yield from wire
        return
    if encoding not in ("gzip", "x-gzip", "deflate"):
        raise outbound.OutboundError(
            f"the answer has Content-Encoding {encoding[:40]!r}, which is not decoded here"
        )
    # 16 + MAX_WBITS: a gzip member; 32 + MAX_WBITS: zlib or gzip, whichever the header says.
    wbits = 16 + zlib.MAX_WBITS if encoding != "deflate" else 32 + zlib.MAX_WBITS
    inflate = zlib.decompressobj(wbits)
    total = 0
    try:
        for chunk in wire:
            data = chunk
            while data:
                out = inflate.decompress(data, cap + 1 - total)  # output bounded per call
                total += len(out)
                if total > cap:
                    raise outbound.AnswerTooLarge(
                        f"the {encoding} answer decompresses to more than the limit of {cap} bytes"
                    )
                yield out
                data = inflate.unconsumed_tail
                if inflate.eof and inflate.unused_data:  # another gzip member follows
                    data, inflate = inflate.unused_data, zlib.decompressobj(wbits)
    except zlib.error as exc:
        raise outbound.OutboundError(f"the {encoding} answer is not valid: {exc}") from None
    rest = inflate.flush()
    if not inflate.eof:
        raise outbound.OutboundError(f"the {encoding} answer is truncated")
    if total + len(rest) > cap:
        raise outbound.AnswerTooLarge(
            f"the {encoding} answer decompresses to more than the limit of {cap} bytes"
        )
    yield rest


def _read_whole(raw: Any, cap: int) -> bytes:
    """A JSON (or error) answer, decoded, at most ``cap`` bytes."""
    try:
        return b"".join(_decoded(raw, cap))
    finally:
        raw.release_conn()


def _read_tail(raw: Any, cap: int) -> bytes:
    """A (possibly huge) log, decoded: only its last ``_MAX_LOG_BYTES`` are kept, and a
    compressed one may not decode past ``cap``."""
    chunks: list[bytes] = []
    size = 0
    try:
        for chunk in _decoded(raw, cap):
            chunks.append(chunk)
            size += len(chunk)
            while size - len(chunks[0]) > _MAX_LOG_BYTES:
                size -= len(chunks.pop(0))
    finally:
        raw.release_conn()
    return b"".join(chunks)[-_MAX_LOG_BYTES:]


def relist_backoff_s(base_s: float = 2.0) -> float:
    """AICR's 2 s ±20 % re-list backoff."""
    return base_s * random.uniform(0.8, 1.2)  # noqa: S311 - jitter


Clock = Callable[[], float]
