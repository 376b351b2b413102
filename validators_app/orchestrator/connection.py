"""``test_connection``: the server version, or the exact reason the cluster cannot be reached."""

from __future__ import annotations

import json
import socket
import ssl

import urllib3
from kubernetes import client

from .model import ConnectionResult

__all__ = ["test_connection"]


def _transport_detail(exc: BaseException, timeout_s: float) -> str:
    reason = exc.reason if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason else exc
    if isinstance(reason, (urllib3.exceptions.SSLError, ssl.SSLError)):
        return f"TLS verification failed: {reason}"
    # NewConnectionError subclasses ConnectTimeoutError in urllib3: test it first.
    if isinstance(reason, (urllib3.exceptions.NewConnectionError, ConnectionError)):
        return f"unreachable: {reason}"
    if isinstance(reason, (urllib3.exceptions.TimeoutError, socket.timeout, TimeoutError)):
        return f"timed out after {timeout_s:g}s: {reason}"
    if isinstance(reason, urllib3.exceptions.ProtocolError):
        return f"connection broken: {reason}"
    return f"{type(reason).__name__}: {reason}"


def test_connection(api: client.ApiClient, *, timeout_s: float = 10) -> ConnectionResult:  # noqa: PT028
    """GET /version with ``timeout_s`` for connect and read; never raises for cluster faults."""
    try:
        method, url, headers, body, post = api.param_serialize(
            "GET",
            "/version",
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
        )
        resp = api.call_api(
            method, url, headers, body, post, _request_timeout=(timeout_s, timeout_s)
        )
        data = resp.read()
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        return ConnectionResult(False, "", _transport_detail(exc, timeout_s))
    if resp.status in (401, 403):
        word = "unauthorized" if resp.status == 401 else "forbidden"
        return ConnectionResult(False, "", f"HTTP {resp.status}: credentials were refused ({word})")
    if not 200 <= resp.status <= 299:
        return ConnectionResult(
            False, "", f"HTTP {resp.status} {resp.reason or ''} from /version".strip()
        )
    try:
        doc = json.loads(data)
        version = doc["gitVersion"]
        if not isinstance(version, str) or not version:
            raise ValueError("empty gitVersion")
    except (ValueError, KeyError, TypeError) as exc:
        return ConnectionResult(False, "", f"/version did not answer a Kubernetes version: {exc}")
    return ConnectionResult(True, version, f"connected; Kubernetes {version}")


test_connection.__test__ = False  # type: ignore[attr-defined]  # a product API, not a pytest test
