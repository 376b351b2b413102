"""The Kubernetes REST calls of a run, over the official client's ``ApiClient``, with retries.

Requests go through ``ApiClient.param_serialize``/``call_api`` (the client's own auth, TLS and
connection pool) with JSON dicts in and out, so the bodies are exactly the ones ``plan.py``
renders (server-side apply needs ``application/apply-patch+yaml`` with the object as sent).
Watches use ``kubernetes.watch.Watch``.

Every call retries 429, 5xx and transport errors with exponential backoff, bounded in attempts
and in total time; then ``ApiUnavailable`` carries the reason that ends the run as ``error``.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Generator, Mapping
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


class KubeError(RuntimeError):
    """An API call did not give what the run needs (the base of the three below)."""


class ApiUnavailable(KubeError):
    """The API kept failing (or refused for a reason retrying cannot fix); the run errors."""


class NotFound(KubeError, LookupError):
    """404 from the API server."""


class AlreadyExists(KubeError):
    """409 from the API server on create."""


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 8
    base_delay_s: float = 0.2
    max_delay_s: float = 5.0
    total_s: float = 60.0
    request_timeout: tuple[float, float] = (10.0, 60.0)  # connect, read


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
        except ValueError:
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
    """JSON REST helpers for the handful of resources a run touches."""

    def __init__(self, api: client.ApiClient, retry: RetryPolicy | None = None) -> None:
        self.api = api
        self.retry = retry or RetryPolicy()

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
            return _read_capped(resp)
        data: bytes = resp.read()
        if not 200 <= resp.status <= 299:
            exc = ApiException(
                status=resp.status, reason=resp.reason, body=data.decode("utf-8", "replace")
            )
            exc.headers = resp.headers  # Retry-After
            raise exc
        return json.loads(data) if data else None

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
                time.sleep(delay)

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


def _read_capped(resp: Any) -> bytes:
    """Read a (possibly huge) body in chunks, keeping only the last ``_MAX_LOG_BYTES``."""
    raw = resp.response  # the urllib3 response under the client's RESTResponse
    chunks: list[bytes] = []
    size = 0
    try:
        for chunk in raw.stream(1 << 16):
            chunks.append(chunk)
            size += len(chunk)
            while size - len(chunks[0]) > _MAX_LOG_BYTES:
                size -= len(chunks.pop(0))
    finally:
        raw.release_conn()
    return b"".join(chunks)[-_MAX_LOG_BYTES:]


def sleep_backoff(base_s: float = 2.0) -> None:
    """AICR's 2 s ±20 % re-list backoff."""
    time.sleep(base_s * random.uniform(0.8, 1.2))  # noqa: S311 - jitter


Clock = Callable[[], float]
