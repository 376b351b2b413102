"""A hostile registry on loopback answering a push: what it says can never make the push read
without bound, connect to an address the outbound policy refuses, or carry the site's registry
login anywhere but the registry. A small HTTP server plays the registry; it records every
request (method, path, Authorization header), so a test can say what was never sent."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from aicr_site.lib import outbound
from evidence_app.services import oci, oci_push

pytestmark = pytest.mark.django_db
FILES = {"recipe.yaml": b"kind: RecipeResult\n", "manifest.json": b"{}"}
# (status, headers, body); a body of None streams "x" until the client goes away.
Answer = tuple[int, dict[str, str], bytes | None]


@dataclass
class Registry:
    """Answers by (method, path without query); 404 otherwise. Records each request."""

    answers: dict[tuple[str, str], Callable[[Any], Answer]] = field(default_factory=dict)
    seen: list[tuple[str, str, str]] = field(default_factory=list)  # method, path, auth
    host: str = ""

    def on(self, method: str, path: str, answer: Answer | Callable[[Any], Answer]) -> None:
        self.answers[(method, path)] = answer if callable(answer) else (lambda _r: answer)


def _serve(registry: Registry) -> tuple[ThreadingHTTPServer, str]:
    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            path = self.path.split("?", 1)[0]
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            registry.seen.append((self.command, path, self.headers.get("Authorization", "")))
            found = registry.answers.get((self.command, path))
            status, headers, body = found(self) if found else (404, {}, b"")
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            if body is not None:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if body is not None:
                self.wfile.write(body)
                return
            try:
                for _ in range(10_000):  # 640 MB if the client read it all
                    self.wfile.write(b"x" * 65536)
            except OSError:
                pass  # the client stopped reading: what the test wants

        do_GET = do_HEAD = do_POST = do_PUT = _answer

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"127.0.0.1:{server.server_address[1]}"


@pytest.fixture
def servers() -> Iterator[Callable[[], Registry]]:
    started: list[ThreadingHTTPServer] = []

    def start() -> Registry:
        registry = Registry()
        server, registry.host = _serve(registry)
        started.append(server)
        return registry

    yield start
    for server in started:
        server.shutdown()
        server.server_close()


@pytest.fixture
def hostile(settings: Any, servers: Callable[[], Registry]) -> Registry:
    registry = servers()
    settings.EVIDENCE_OCI_ALLOW_LOOPBACK_HTTP = True
    settings.EVIDENCE_OCI_TIMEOUT_SECONDS = 5
    settings.EVIDENCE_OCI_ALLOWED_REGISTRIES = []
    settings.RUN_EVIDENCE_OCI_REPOSITORY = f"{registry.host}/e"
    return registry


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every address a connection was opened to (the outbound policy's one connect)."""
    opened: list[Any] = []
    real = outbound.connect

    def spy(destination: Any, *args: Any, **kwargs: Any) -> Any:
        opened.append(destination.address)
        return real(destination, *args, **kwargs)

    monkeypatch.setattr(outbound, "connect", spy)
    return opened


def _push(registry: Registry, login: oci.Credentials | None = None) -> oci_push.PushedArtifact:
    target = oci.parse_oci_repository(f"{registry.host}/e")
    return oci_push.push_artifact(target, files=FILES, tag="t", annotations={}, credentials=login)


def _start_upload(location: str) -> Answer:
    return (202, {"Location": location}, b"")


def test_an_endless_answer_is_cut_at_the_cap(hostile: Registry) -> None:
    hostile.on("POST", "/v2/e/blobs/uploads/", (202, {"Location": "/up"}, None))

    with pytest.raises(oci_push.OciPushError, match="over the limit of 4194304 bytes"):
        _push(hostile)

    assert [(m, p) for m, p, _ in hostile.seen] == [
        ("HEAD", f"/v2/e/blobs/{oci_push.Descriptor.of('', oci_push.EMPTY_CONFIG).digest}"),
        ("POST", "/v2/e/blobs/uploads/"),
    ]


def test_a_declared_huge_answer_is_refused_unread(hostile: Registry) -> None:
    huge = {"Content-Length": str(1 << 30)}
    hostile.on("POST", "/v2/e/blobs/uploads/", lambda _r: (202, {"Location": "/up", **huge}, b""))

    with pytest.raises(oci_push.OciPushError, match="over the limit"):
        _push(hostile)


@pytest.mark.parametrize(
    "location",
    [
        "http://10.1.2.3/v2/e/blobs/uploads/1",
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00::1]/upload",
        "https://192.168.0.10/upload",
    ],
)
def test_an_upload_location_on_a_refused_address_is_never_connected_to(
    hostile: Registry, connections: list[Any], location: str
) -> None:
    hostile.on("POST", "/v2/e/blobs/uploads/", _start_upload(location))

    with pytest.raises(oci_push.OciPushError, match="non-public address"):
        _push(hostile)

    assert connections
    assert all(address.is_loopback for address in connections)
    assert ("PUT", "/v2/e/blobs/uploads/1", "") not in hostile.seen


def test_a_redirect_of_the_manifest_to_a_refused_address_is_not_followed(
    hostile: Registry, connections: list[Any]
) -> None:
    hostile.on("POST", "/v2/e/blobs/uploads/", _start_upload("/up"))
    hostile.on("PUT", "/up", (201, {}, b""))
    redirect = {"Location": "http://10.0.0.7:5000/v2/e/manifests/t"}
    hostile.on("PUT", "/v2/e/manifests/t", (307, redirect, b""))

    with pytest.raises(oci_push.OciPushError, match="non-public address"):
        _push(hostile)

    assert all(address.is_loopback for address in connections)


def test_the_login_goes_to_the_registry_and_nowhere_else(
    hostile: Registry, servers: Callable[[], Registry]
) -> None:
    """The upload location names another host (another loopback port here: the policy lets
    loopback through in tests): the blob goes there without the registry's Authorization."""
    elsewhere = servers()
    elsewhere.on("PUT", "/up", (201, {}, b""))
    login = oci.Credentials(username="pusher", password="hunter2-secret")
    challenge = {"WWW-Authenticate": 'Basic realm="tests"'}

    def guarded(answer: Answer) -> Callable[[Any], Answer]:
        def respond(request: Any) -> Answer:
            if request.headers.get("Authorization") != login.basic:
                return (401, challenge, b"")
            return answer

        return respond

    hostile.on(
        "POST", "/v2/e/blobs/uploads/", guarded(_start_upload(f"http://{elsewhere.host}/up"))
    )
    hostile.on("PUT", "/v2/e/manifests/t", guarded((201, {}, b"")))

    pushed = _push(hostile, login)

    assert pushed.reference == f"{hostile.host}/e:t"
    assert {auth for _, _, auth in elsewhere.seen} == {""}
    assert [m for m, _, _ in elsewhere.seen] == ["PUT", "PUT"]  # config and layer blobs
    assert ("PUT", "/v2/e/manifests/t", login.basic) in hostile.seen


def test_a_token_realm_on_a_refused_address_is_not_asked(
    hostile: Registry, connections: list[Any]
) -> None:
    realm = {"WWW-Authenticate": 'Bearer realm="http://10.9.9.9/token",service="r"'}
    hostile.on("POST", "/v2/e/blobs/uploads/", (401, realm, b""))

    with pytest.raises(oci_push.OciPushError, match="non-public address"):
        _push(hostile, oci.Credentials(username="pusher", password="pw"))

    assert all(address.is_loopback for address in connections)


def test_a_registry_that_stores_another_manifest_is_refused(hostile: Registry) -> None:
    hostile.on("POST", "/v2/e/blobs/uploads/", _start_upload("/up"))
    hostile.on("PUT", "/up", (201, {}, b""))
    other = {"Docker-Content-Digest": "sha256:" + "0" * 64}
    hostile.on("PUT", "/v2/e/manifests/t", (201, other, b""))

    with pytest.raises(oci_push.OciPushError, match="stored manifest t as sha256:0000"):
        _push(hostile)


def test_a_registry_error_is_named_without_its_text(hostile: Registry) -> None:
    body = b'{"errors":[{"code":"DENIED","message":"<script>alert(1)</script>"}]}'
    hostile.on("POST", "/v2/e/blobs/uploads/", (403, {"Content-Type": "application/json"}, body))

    with pytest.raises(oci_push.OciPushError) as info:
        _push(hostile)

    assert info.value.message == (
        f"registry {hostile.host} answered HTTP 403 DENIED (the registry refused the "
        "credentials) to the start of the upload of blob "
        f"{oci_push.Descriptor.of('', oci_push.EMPTY_CONFIG).digest}"
    )
