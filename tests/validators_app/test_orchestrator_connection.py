"""test_connection against loopback servers that are not (well-behaved) Kubernetes API servers."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import kubernetes
import pytest

from validators_app.orchestrator import test_connection
from validators_app.orchestrator.connection import INVALID_ANSWER


@contextmanager
def serving(status: int, body: bytes) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _api(url: str) -> kubernetes.client.ApiClient:
    return kubernetes.config.new_client_from_config_dict(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": url}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        }
    )


@pytest.mark.parametrize(
    ("status", "body", "detail"),
    [
        (403, b'{"kind":"Status","code":403}', "HTTP 403: credentials were refused (forbidden)"),
        # Every other answer is the one reason class, whatever the port said (no status shown).
        (503, b"{}", INVALID_ANSWER),
        (404, b"<html>not found</html>", INVALID_ANSWER),
        (200, b"<html>not kubernetes</html>", INVALID_ANSWER),
        (200, b'{"gitVersion": ""}', INVALID_ANSWER),
        (200, b'{"gitVersion": 7}', INVALID_ANSWER),
        (200, b"[" * 30_000 + b"]" * 30_000, INVALID_ANSWER),
    ],
)
def test_it_names_what_is_wrong(status: int, body: bytes, detail: str) -> None:
    with serving(status, body) as url:
        result = test_connection(_api(url), timeout_s=30)
    assert not result.ok
    assert result.server_version == ""
    assert result.detail == detail


def test_it_reads_the_version() -> None:
    with serving(200, b'{"major":"1","minor":"33","gitVersion":"v1.33.5-eks-113cf36"}') as url:
        result = test_connection(_api(url), timeout_s=30)
    assert (result.ok, result.server_version) == (True, "v1.33.5-eks-113cf36")


def test_a_runs_transport_failures_read_as_one_reason_class() -> None:
    """A run's error must not say whether a port refused, hung or spoke TLS."""
    import ssl

    import urllib3

    from aicr_site.lib import outbound
    from validators_app.orchestrator.kube import TRANSPORT_FAILURE, describe

    failures = [
        ConnectionRefusedError(111, "Connection refused"),
        TimeoutError("timed out"),
        ssl.SSLCertVerificationError("certificate verify failed"),
        urllib3.exceptions.ProtocolError("Connection broken"),
        urllib3.exceptions.MaxRetryError(None, "/", ConnectionRefusedError()),  # type: ignore[arg-type]
    ]
    assert {describe(exc) for exc in failures} == {TRANSPORT_FAILURE}
    refused = outbound.DestinationRefused("the cluster's server x resolves to a loopback address")
    assert describe(refused) == refused.message
