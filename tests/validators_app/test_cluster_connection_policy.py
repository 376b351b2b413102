"""Where a cluster may be reached and what "Test connection" makes of a hostile peer.

Every peer is a loopback listener that records each connection it accepts; names other than
loopback ones are answered by a patched ``socket.getaddrinfo`` (no traffic leaves the machine).
Refused addresses are refused at registration (400) and again before any connection: the
listener sees none. Peers on loopback are *simulated* clusters (loopback is allowed for them):
an endless answer is cut at the cap with bounded memory, a drip at the overall deadline, deep
nesting and a huge ``gitVersion`` are answered cleanly. The throttle answers 429.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client
from rest_framework.test import APIClient

from evidence_app.models import Role
from evidence_app.services.tokens import token_create, user_with_role
from tests.validators_app.kubeconfigs import (
    b64,
    client_certificate_user,
    closed_port_url,
    https_kubeconfig,
    kubeconfig,
    pki,
    serve_version,
)
from validators_app import crypto
from validators_app.models import Cluster
from validators_app.orchestrator.connection import (
    INVALID_ANSWER,
    MAX_ANSWER_BYTES,
    MAX_VERSION_CHARS,
    NOT_REACHABLE,
)
from validators_app.throttles import CLUSTER_TEST_THROTTLES

pytestmark = pytest.mark.django_db
URL = "/api/v1/clusters/"
HEADERS = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"


class Peer:
    """A loopback listener: counts the connections it accepts and the bytes it sends, and
    answers each request with ``behaviour(peer, connection)``."""

    def __init__(self, behaviour: Callable[[Peer, socket.socket], None] | None = None) -> None:
        self.behaviour = behaviour
        self.accepted = 0
        self.sent = 0
        self._stop = threading.Event()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self._listener.settimeout(0.05)
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def send(self, conn: socket.socket, data: bytes) -> None:
        conn.sendall(data)
        self.sent += len(data)

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(10)
            request = b""
            with contextlib.suppress(OSError):
                while b"\r\n\r\n" not in request and len(request) < 65536:
                    chunk = conn.recv(4096)
                    if not chunk:
                        return
                    request += chunk
                if self.behaviour is not None and not self._stop.is_set():
                    self.behaviour(self, conn)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self._listener.close()


@contextlib.contextmanager
def peer(behaviour: Callable[[Peer, socket.socket], None] | None = None) -> Iterator[Peer]:
    listening = Peer(behaviour)
    try:
        yield listening
    finally:
        listening.close()


def maintainer(username: str = "m") -> APIClient:
    api = APIClient()
    _, raw = token_create(
        user=user_with_role(username=username, role=Role.MAINTAINER), role=Role.MAINTAINER
    )
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return api


def register(api: APIClient, text: str, environment: str, name: str = "c") -> Any:
    body = {"name": name, "kubeconfig": text, "environment": environment}
    return api.post(URL, data=json.dumps(body), content_type="application/json")


def test_connection(api: APIClient, cluster_id: int) -> Any:
    return api.post(f"{URL}{cluster_id}/test/")


test_connection.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test


def simulated(api: APIClient, port: int) -> int:
    created = register(api, kubeconfig(server=f"http://127.0.0.1:{port}"), "simulated")
    assert created.status_code == 201, created.content
    return int(created.json()["id"])


# --- addresses ----------------------------------------------------------------------------------

METADATA_SPELLINGS = [
    "2852039166",
    "0xa9fea9fe",
    "0251.0376.0251.0376",
    "169.254.43518",
    "0",
    "[::ffff:169.254.169.254]",
    "[::ffff:a9fe:a9fe]",
    "[fe80::1]",
    "[::]",
]
LOOPBACK_SPELLINGS = [
    "2130706433",
    "0x7f000001",
    "017700000001",
    "127.1",
    "127.0.0.1",
    "[::ffff:127.0.0.1]",
    "localhost",
]


@pytest.mark.parametrize("host", METADATA_SPELLINGS + LOOPBACK_SPELLINGS)
def test_a_real_cluster_at_a_refused_address_is_a_400_and_nothing_is_contacted(host: str) -> None:
    with peer() as listening:
        created = register(
            maintainer(), https_kubeconfig(f"https://{host}:{listening.port}/"), "real"
        )
    assert created.status_code == 400, created.content
    body = created.json()
    assert body["field"] == "kubeconfig"
    assert "not a cluster this site connects to" in body["detail"]
    assert listening.accepted == 0
    assert not Cluster.objects.exists()


@pytest.mark.parametrize("host", METADATA_SPELLINGS)
def test_a_simulated_cluster_is_not_at_a_link_local_or_unspecified_address_either(
    host: str,
) -> None:
    created = register(
        maintainer(),
        kubeconfig(server=f"https://{host}:6443/", cluster={"insecure-skip-tls-verify": True}),
        "simulated",
    )
    assert created.status_code == 400, created.content


@pytest.mark.parametrize("host", ["10.0.0.5", "192.168.10.20", "gpu.example.com", "[fd00::5]"])
def test_ordinary_private_and_public_servers_register_without_any_connection(host: str) -> None:
    created = register(maintainer(), https_kubeconfig(f"https://{host}:6443"), "real")
    assert created.status_code == 201, created.content


def test_private_servers_are_refused_when_the_site_says_so(settings: Any) -> None:
    settings.CLUSTER_PRIVATE_ADDRESSES = False
    created = register(maintainer(), https_kubeconfig("https://167772165:6443"), "real")
    assert created.status_code == 400
    assert "private address" in created.json()["detail"]


def test_a_stored_cluster_at_a_refused_address_is_never_connected_to() -> None:
    """A cluster stored before the rules tightened: the test re-checks and refuses."""
    with peer() as listening:
        text = https_kubeconfig(f"https://2130706433:{listening.port}/")
        cluster = Cluster.objects.create(
            name="old",
            environment="real",
            server=f"https://2130706433:{listening.port}/",
            context_name="test",
            auth_kind="token",
            kubeconfig_encrypted=crypto.kubeconfig_encrypt(text),
        )
        body = test_connection(maintainer(), cluster.pk).json()
    assert body["ok"] is False
    assert "loopback" in body["detail"]
    assert listening.accepted == 0


def _resolve_as(monkeypatch: pytest.MonkeyPatch, names: dict[str, list[str]]) -> list[str]:
    """``names`` resolve to the given addresses, one answer per lookup (the last repeats);
    loopback names go to the real resolver; anything else fails the test."""
    real = socket.getaddrinfo
    lookups: list[str] = []

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in names:
            assert host in ("127.0.0.1", "::1") or kwargs.get("flags"), f"lookup of {host!r}"
            return real(host, port, *args, **kwargs)
        lookups.append(host)
        answers = names[host]
        address = answers.pop(0) if len(answers) > 1 else answers[0]
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, port))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return lookups


def test_a_real_cluster_whose_name_resolves_to_loopback_is_never_connected_to(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with peer() as listening:
        _resolve_as(monkeypatch, {"cluster.example": ["127.0.0.1"]})
        api = maintainer()
        created = register(
            api, https_kubeconfig(f"https://cluster.example:{listening.port}"), "real"
        )
        assert created.status_code == 201  # a name: checked when it is resolved
        body = test_connection(api, created.json()["id"]).json()
    assert body == {
        "ok": False,
        "server_version": "",
        "detail": "refused: the cluster's server cluster.example resolves to a loopback address",
    }
    assert listening.accepted == 0


def test_the_client_connects_to_the_checked_address_with_the_name_for_tls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first lookup says 127.0.0.1 (where the server listens), any later one 127.0.0.2
    (nothing there): the test passes only if the kubernetes client used the checked address,
    and the certificate (issued to ``localhost``) was verified against the name."""
    api = maintainer()
    with serve_version(tls=True) as url:
        port = int(url.rsplit(":", 1)[1])
        lookups = _resolve_as(monkeypatch, {"localhost": ["127.0.0.1", "127.0.0.2"]})
        created = register(
            api,
            https_kubeconfig(f"https://localhost:{port}", user=client_certificate_user()),
            "simulated",
        )
        assert created.status_code == 201, created.content
        body = test_connection(api, created.json()["id"]).json()
    assert body["ok"] is True, body
    assert lookups == ["localhost"]  # one lookup, at the check


# --- hostile peers (simulated clusters on loopback) ----------------------------------------


def endless(p: Peer, conn: socket.socket) -> None:
    p.send(conn, HEADERS + b"\r\n" + b'{"gitVersion": "')
    chunk = b"a" * (1024 * 1024)
    while p.sent < 300 * 1024 * 1024:
        p.send(conn, chunk)


def test_an_endless_version_answer_is_cut_at_the_cap_with_bounded_memory(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="validators_app.orchestrator.connection")
    api = maintainer()
    with peer(endless) as listening:
        cluster_id = simulated(api, listening.port)
        tracemalloc.start()
        try:
            response = test_connection(api, cluster_id)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert response.status_code == 200
    assert response.json() == {
        "ok": False,
        "server_version": "",
        "detail": INVALID_ANSWER,
    }
    assert peak < 8 * 1024 * 1024, f"{peak} bytes allocated reading a capped answer"
    assert listening.sent < 64 * 1024 * 1024  # it stopped being read long before 300 MB
    assert f"answer over {MAX_ANSWER_BYTES} bytes" in caplog.text  # why, for operators only


def test_a_declared_300_mb_answer_is_refused_unread(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="validators_app.orchestrator.connection")

    def declared(p: Peer, conn: socket.socket) -> None:
        p.send(conn, HEADERS + b"Content-Length: 314572800\r\n\r\n{")

    api = maintainer()
    with peer(declared) as listening:
        body = test_connection(api, simulated(api, listening.port)).json()
    assert body["detail"] == INVALID_ANSWER
    assert f"answer over {MAX_ANSWER_BYTES} bytes" in caplog.text  # why, for operators only


@pytest.mark.parametrize("where", ["status line", "body"])
def test_a_dripping_peer_is_cut_at_the_overall_deadline(settings: Any, where: str) -> None:
    """One byte every 0.1 s never trips a per-read timeout; the overall deadline (lowered to
    0.5 s here, 10 s by default) ends it. Counted, not timed: the whole drip is 200 bytes over
    20 s, and the client must hang up long before the peer is done."""
    settings.CLUSTER_TEST_TIMEOUT_SECONDS = 0.5
    drip_bytes = (b"HTTP/1.1 200 OK\r\n" if where == "status line" else b"{") * 200
    dripped = []

    def drip(p: Peer, conn: socket.socket) -> None:
        if where == "body":
            p.send(conn, HEADERS + b"\r\n")
        for byte in drip_bytes[:200]:
            try:
                conn.sendall(bytes([byte]))
            except OSError:
                return  # the client hung up
            dripped.append(byte)
            time.sleep(0.1)

    api = maintainer()
    with peer(drip) as listening:
        cluster_id = simulated(api, listening.port)
        body = test_connection(api, cluster_id).json()
        assert listening.accepted == 1
    assert body == {"ok": False, "server_version": "", "detail": NOT_REACHABLE}
    assert len(dripped) < 100, f"the client read {len(dripped)} of 200 dripped bytes"


def _answering(document: bytes) -> Callable[[Peer, socket.socket], None]:
    def answer(p: Peer, conn: socket.socket) -> None:
        p.send(conn, HEADERS + f"Content-Length: {len(document)}\r\n\r\n".encode() + document)

    return answer


def test_a_deeply_nested_version_is_an_invalid_answer_not_a_500() -> None:
    api = maintainer()
    with peer(_answering(b"[" * 30_000 + b"]" * 30_000)) as listening:
        response = test_connection(api, simulated(api, listening.port))
    assert response.status_code == 200
    assert response.json() == {"ok": False, "server_version": "", "detail": INVALID_ANSWER}


def test_a_huge_git_version_is_truncated_and_never_echoed() -> None:
    api = maintainer()
    version = "v1.33.0-" + "x" * 20_000
    with peer(_answering(json.dumps({"gitVersion": version}).encode())) as listening:
        cluster_id = simulated(api, listening.port)
        response = test_connection(api, cluster_id)
    body = response.json()
    assert body["ok"] is True
    assert len(body["server_version"]) == MAX_VERSION_CHARS
    assert body["server_version"].startswith("v1.33.0-xxx")
    assert len(response.content) < 1000
    detail = api.get(f"{URL}{cluster_id}/").json()["last_test"]
    assert len(detail["server_version"]) <= MAX_VERSION_CHARS


def test_a_3_mb_git_version_is_refused_at_the_cap(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="validators_app.orchestrator.connection")
    api = maintainer()
    document = json.dumps({"gitVersion": "v" + "9" * 3_000_000}).encode()
    with peer(_answering(document)) as listening:
        response = test_connection(api, simulated(api, listening.port))
    assert response.json()["detail"] == INVALID_ANSWER
    assert len(response.content) < 1000
    assert f"answer over {MAX_ANSWER_BYTES} bytes" in caplog.text  # why, for operators only


def test_refused_timed_out_and_tls_failures_read_the_same(settings: Any) -> None:
    """What a port answered is not shown: a closed port, a silent one and a TLS server with an
    unknown CA all give the one reason class."""
    settings.CLUSTER_TEST_TIMEOUT_SECONDS = 0.5
    settings.CLUSTER_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    api = maintainer()
    details = []
    closed = simulated(api, int(closed_port_url().rsplit(":", 1)[1]))
    details.append(test_connection(api, closed).json()["detail"])
    with peer() as silent:
        details.append(
            test_connection(api, simulated_named(api, silent.port, "s")).json()["detail"]
        )
    with serve_version(tls=True) as url:
        created = register(
            api,
            https_kubeconfig(
                url, cluster={"certificate-authority-data": b64(pki().client_cert_pem)}
            ),
            "real",
            name="tls",
        )
        details.append(test_connection(api, created.json()["id"]).json()["detail"])
    assert details == [NOT_REACHABLE] * 3


def simulated_named(api: APIClient, port: int, name: str) -> int:
    created = register(api, kubeconfig(server=f"http://127.0.0.1:{port}"), "simulated", name)
    assert created.status_code == 201, created.content
    return int(created.json()["id"])


# --- throttle ------------------------------------------------------------------------------


def _rates(monkeypatch: pytest.MonkeyPatch, per_cluster: str, per_user: str) -> None:
    rates = {"cluster-test": per_cluster, "cluster-test-user": per_user}
    for throttle in CLUSTER_TEST_THROTTLES:
        monkeypatch.setattr(throttle, "THROTTLE_RATES", rates)
    cache.clear()


@pytest.fixture
def three_per_minute(monkeypatch: pytest.MonkeyPatch) -> None:
    _rates(monkeypatch, per_cluster="3/min", per_user="100/min")


@pytest.fixture
def three_per_user(monkeypatch: pytest.MonkeyPatch) -> None:
    _rates(monkeypatch, per_cluster="100/min", per_user="3/min")


def test_the_api_answers_429_after_n_tests_per_user_and_cluster(three_per_minute: None) -> None:
    api = maintainer()
    port = int(closed_port_url().rsplit(":", 1)[1])
    first, second = simulated_named(api, port, "a"), simulated_named(api, port, "b")
    statuses = [test_connection(api, first).status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    assert test_connection(api, second).status_code == 200  # another cluster
    assert test_connection(maintainer("other"), first).status_code == 200  # another user
    throttled = test_connection(api, first)
    assert throttled.status_code == 429
    assert throttled.json()["code"] == "throttled"


def test_more_clusters_buy_no_more_tests_past_the_per_user_rate(three_per_user: None) -> None:
    """A maintainer who registers a cluster per port to probe gets the per-user rate in all,
    on the API and the page alike (one count)."""
    api = maintainer()
    port = int(closed_port_url().rsplit(":", 1)[1])
    ids = [simulated_named(api, port, f"probe-{n}") for n in range(4)]
    statuses = [test_connection(api, cluster_id).status_code for cluster_id in ids[:2]]
    page = Client()
    page.force_login(user_with_role(username="m", role=Role.MAINTAINER))  # the same user
    statuses.append(page.post(f"/clusters/{ids[2]}/test/").status_code)
    statuses.append(test_connection(api, ids[3]).status_code)
    assert statuses == [200, 200, 302, 429]
    assert test_connection(maintainer("other"), ids[3]).status_code == 200  # another user


def test_the_page_answers_429_after_n_tests(three_per_minute: None) -> None:
    api = maintainer()
    cluster_id = simulated(api, int(closed_port_url().rsplit(":", 1)[1]))
    page = Client()
    page.force_login(user_with_role(username="page-m", role=Role.MAINTAINER))
    statuses = [page.post(f"/clusters/{cluster_id}/test/").status_code for _ in range(4)]
    assert statuses == [302, 302, 302, 429]


def test_a_redirect_is_not_followed() -> None:
    """An API server has no reason to send the client (and its bearer token) elsewhere."""
    with peer() as elsewhere:

        def redirect(p: Peer, conn: socket.socket) -> None:
            location = f"http://127.0.0.1:{elsewhere.port}/version"
            p.send(conn, b"HTTP/1.1 302 Found\r\nLocation: " + location.encode() + b"\r\n")
            p.send(conn, b"Content-Length: 0\r\nConnection: close\r\n\r\n")

        api = maintainer()
        with peer(redirect) as listening:
            body = test_connection(api, simulated(api, listening.port)).json()
    assert body["ok"] is False
    assert listening.accepted == 1
    assert elsewhere.accepted == 0
