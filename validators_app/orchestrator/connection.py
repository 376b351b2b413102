"""``test_connection``: the server version, or one reason class for why there is none.

The answer comes from an address a maintainer typed, so it is read as hostile: at most
``max_answer_bytes`` (the client's ``outbound.Limits`` bound the bytes received and the whole
exchange's time), parsed with the bounded JSON loader, and the version shown is cut to
``MAX_VERSION_CHARS``. What users see never says what a port answered: refused, timed out,
dropped and TLS failures are all ``NOT_REACHABLE``, and every answer that is not a Kubernetes
version (another status, not JSON, too deep, over the cap) is the one ``INVALID_ANSWER``; the
exception or the status and size are logged for operators. Only 401/403 are told apart, since
the maintainer needs to know that the credentials were refused.
"""

from __future__ import annotations

import logging

import urllib3
from kubernetes import client

from aicr_site.lib import outbound
from evidence_app.verification._json import JSONLimitError, JSONLimits, load_json

from .model import ConnectionResult

__all__ = ["INVALID_ANSWER", "MAX_VERSION_CHARS", "NOT_REACHABLE", "test_connection"]

logger = logging.getLogger(__name__)

MAX_VERSION_CHARS = 100
MAX_ANSWER_BYTES = 64 * 1024  # a /version answer is a few hundred bytes
NOT_REACHABLE = (
    "not reachable: no Kubernetes API server answered (connection refused, timed out, dropped "
    "or failed TLS verification)"
)
INVALID_ANSWER = "invalid answer: /version did not answer a Kubernetes version"
_VERSION_LIMITS = JSONLimits(max_bytes=MAX_ANSWER_BYTES, max_depth=4, max_object_keys=32)


def _printable(text: str) -> str:
    shown = "".join(ch if ch.isprintable() else "?" for ch in text[: MAX_VERSION_CHARS + 1])
    return shown if len(shown) <= MAX_VERSION_CHARS else shown[: MAX_VERSION_CHARS - 1] + "…"


def test_connection(
    api: client.ApiClient,
    *,
    timeout_s: float = 10,  # noqa: PT028
    max_answer_bytes: int = MAX_ANSWER_BYTES,  # noqa: PT028
) -> ConnectionResult:
    """GET /version with ``timeout_s`` for connect and each read (the client's limits bound the
    whole exchange); never raises for cluster faults."""
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
        try:
            data = outbound.read_capped(resp.response, max_answer_bytes)
        finally:
            resp.response.release_conn()
    except outbound.DestinationRefused as exc:
        return ConnectionResult(False, "", f"refused: {exc.message}")
    except outbound.AnswerTooLarge:
        logger.info("connection test: answer over %d bytes", max_answer_bytes)
        return ConnectionResult(False, "", INVALID_ANSWER)
    except (outbound.OutboundError, urllib3.exceptions.HTTPError, OSError) as exc:
        logger.info("connection test: %s", type(exc).__name__, exc_info=True)
        return ConnectionResult(False, "", NOT_REACHABLE)
    if resp.status in (401, 403):
        word = "unauthorized" if resp.status == 401 else "forbidden"
        return ConnectionResult(False, "", f"HTTP {resp.status}: credentials were refused ({word})")
    if not 200 <= resp.status <= 299:
        logger.info("connection test: HTTP %d from /version", resp.status)
        return ConnectionResult(False, "", INVALID_ANSWER)
    try:
        doc = load_json(data, what="/version", limits=_VERSION_LIMITS)
    except JSONLimitError as exc:
        logger.info("connection test: %s", exc)
        return ConnectionResult(False, "", INVALID_ANSWER)
    version = doc.get("gitVersion") if isinstance(doc, dict) else None
    if not isinstance(version, str) or not version.strip():
        logger.info("connection test: no gitVersion string in /version")
        return ConnectionResult(False, "", INVALID_ANSWER)
    shown = _printable(version.strip())
    return ConnectionResult(True, shown, f"connected; Kubernetes {shown}")


test_connection.__test__ = False  # type: ignore[attr-defined]  # a product API, not a pytest test
