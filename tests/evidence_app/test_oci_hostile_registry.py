"""A hostile registry on loopback: what it answers can never make a pull unbounded, loop, or
be taken for evidence. A small HTTP server plays the registry (a real one will not serve these
answers); every request it sees is recorded, so a test can say what was never fetched."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from evidence_app.services import oci
from tests.evidence_factories import example_files, tarball

pytestmark = pytest.mark.django_db
TAR_MEDIA = "application/vnd.oci.image.layer.v1.tar+gzip"
BUNDLE_MEDIA = "application/vnd.dev.sigstore.bundle.v0.3+json"


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class Registry:
    """Routes: path → (status, content type, body); records each GET path."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, str, bytes]] = {"/v2/": (200, "application/json", b"{}")}
        self.seen: list[str] = []

    def manifest(self, doc: dict[str, Any], *, repo: str = "e") -> str:
        body = json.dumps(doc).encode()
        digest = _sha(body)
        self.routes[f"/v2/{repo}/manifests/{digest}"] = (200, oci.OCI_MANIFEST, body)
        return digest

    def blob(self, data: bytes, *, repo: str = "e") -> dict[str, Any]:
        digest = _sha(data)
        self.routes[f"/v2/{repo}/blobs/{digest}"] = (200, "application/octet-stream", data)
        return {"mediaType": TAR_MEDIA, "digest": digest, "size": len(data)}


@pytest.fixture
def hostile(settings: Any) -> Iterator[tuple[Registry, str]]:
    settings.EVIDENCE_OCI_ENABLED = True
    settings.EVIDENCE_OCI_ALLOW_LOOPBACK_HTTP = True
    settings.EVIDENCE_OCI_TIMEOUT_SECONDS = 5
    registry = Registry()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            registry.seen.append(self.path)
            status, kind, body = registry.routes.get(self.path, (404, "text/plain", b"no"))
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield registry, f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _pull(host: str, digest: str) -> oci.PulledEvidence:
    return oci.oci_pull(oci.parse_oci_ref(f"{host}/e@{digest}"))


def _artifact(layer: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "schemaVersion": 2,
        "mediaType": oci.OCI_MANIFEST,
        "config": {
            "mediaType": "application/vnd.oci.empty.v1+json",
            "digest": _sha(b"{}"),
            "size": 2,
        },
        "layers": [layer],
        **extra,
    }


def test_a_manifest_that_is_not_the_pinned_one_is_refused(hostile: tuple[Registry, str]) -> None:
    registry, host = hostile
    pinned = "sha256:" + "ab" * 32
    registry.routes[f"/v2/e/manifests/{pinned}"] = (200, oci.OCI_MANIFEST, b'{"layers": []}')
    with pytest.raises(oci.OciError, match="not the pinned"):
        _pull(host, pinned)


def test_a_1_gib_layer_is_refused_before_a_byte_of_it_is_fetched(
    hostile: tuple[Registry, str],
) -> None:
    registry, host = hostile
    digest = registry.manifest(
        _artifact({"mediaType": TAR_MEDIA, "digest": "sha256:" + "cd" * 32, "size": 1 << 30})
    )
    with pytest.raises(oci.OciError, match="over the limit"):
        _pull(host, digest)
    assert not any("/blobs/" in path for path in registry.seen)


def test_a_blob_that_is_not_its_descriptor_is_refused(hostile: tuple[Registry, str]) -> None:
    registry, host = hostile
    layer = registry.blob(b"the real bytes")
    registry.routes[f"/v2/e/blobs/{layer['digest']}"] = (200, "application/octet-stream", b"x" * 14)
    with pytest.raises(oci.OciError, match="does not match its descriptor"):
        _pull(host, registry.manifest(_artifact(layer)))


def _unsigned_directory(registry: Registry) -> tuple[str, dict[str, Any]]:
    layer = registry.blob(tarball(example_files()))
    return registry.manifest(_artifact(layer)), layer


def test_ten_thousand_referrers_are_read_within_the_bounds(hostile: tuple[Registry, str]) -> None:
    registry, host = hostile
    digest, _ = _unsigned_directory(registry)
    index = {
        "schemaVersion": 2,
        "mediaType": oci.INDEXES[0],
        "manifests": [
            {
                "mediaType": oci.OCI_MANIFEST,
                "digest": f"sha256:{i:064x}",
                "size": 500,
                "artifactType": "application/example",
            }
            for i in range(10_000)
        ],
    }
    registry.routes[f"/v2/e/referrers/{digest}"] = (200, oci.INDEXES[0], json.dumps(index).encode())

    pulled = _pull(host, digest)

    # No Sigstore-bundle referrer among them: the directory stays unsigned (and the pipeline
    # refuses it), after one index read and no referrer manifest fetched.
    assert pulled.referrer_digest == ""
    assert [p for p in registry.seen if "/manifests/sha256:0000" in p] == []
    assert len(registry.seen) <= 4


def test_a_referrer_index_over_the_manifest_cap_is_refused(hostile: tuple[Registry, str]) -> None:
    registry, host = hostile
    digest, _ = _unsigned_directory(registry)
    body = b'{"manifests": [' + b'{"a": 1},' * (oci.MAX_MANIFEST_BYTES // 9) + b"{}]}"
    registry.routes[f"/v2/e/referrers/{digest}"] = (200, oci.INDEXES[0], body)
    with pytest.raises(oci.OciError):
        _pull(host, digest)


def test_a_referrer_that_names_another_subject_is_refused(hostile: tuple[Registry, str]) -> None:
    """A loop (a referrer naming itself) or a referrer of something else: one level is read,
    and its subject must be the artifact."""
    registry, host = hostile
    digest, _ = _unsigned_directory(registry)
    bundle = registry.blob(b'{"mediaType": "x"}')
    bundle["mediaType"] = BUNDLE_MEDIA
    self_digest = "sha256:" + "ee" * 32
    referrer = registry.manifest(
        _artifact(bundle, subject={"mediaType": oci.OCI_MANIFEST, "digest": self_digest, "size": 1})
    )
    index = {
        "schemaVersion": 2,
        "mediaType": oci.INDEXES[0],
        "manifests": [
            {
                "mediaType": oci.OCI_MANIFEST,
                "digest": referrer,
                "size": 10,
                "artifactType": BUNDLE_MEDIA,
            }
        ],
    }
    registry.routes[f"/v2/e/referrers/{digest}"] = (200, oci.INDEXES[0], json.dumps(index).encode())
    with pytest.raises(oci.OciError, match="does not name"):
        _pull(host, digest)
    assert registry.seen.count(f"/v2/e/manifests/{referrer}") == 1


def test_a_pointer_to_a_hostile_registry_is_refused_with_the_reason(
    hostile: tuple[Registry, str],
    tmp_path: Any,
    settings: Any,
    django_capture_on_commit_callbacks: Callable[..., Any],
    evidence_db: None,
) -> None:
    from aicr_site.celery import app as celery_app
    from evidence_app.corroborate.allowlist import source_slug
    from evidence_app.models import Evidence, EvidencePointer
    from evidence_app.services import pointers
    from tests.evidence_factories import GITHUB_ISSUER

    registry, host = hostile
    settings.EVIDENCE_OCI_ALLOWED_REGISTRIES = [host]
    digest = registry.manifest(
        _artifact({"mediaType": TAR_MEDIA, "digest": "sha256:" + "cd" * 32, "size": 1 << 30})
    )
    identity = "https://github.com/lab/aicr/.github/workflows/e.yaml@refs/heads/main"
    slug = source_slug(GITHUB_ISSUER, identity)
    folder = tmp_path / "recipes" / "evidence" / "h100-eks-ubuntu-training-kubeflow" / slug
    folder.mkdir(parents=True)
    (tmp_path / "recipes" / "evidence" / "allowlist.yaml").write_text(
        f"schemaVersion: 1.0.0\ncommunity:\n  - issuer: {GITHUB_ISSUER}\n    source: {slug}\n"
    )
    (folder / f"sha256-{digest.removeprefix('sha256:')}.yaml").write_text(
        "schemaVersion: 1.0.0\nrecipe: h100-eks-ubuntu-training-kubeflow\nattestations:\n"
        f"  - attestedAt: 2026-11-30T12:00:00Z\n    bundle:\n      oci: {host}/e\n"
        f"      digest: {digest}\n      predicateType: https://aicr.run/recipe-evidence/v1\n"
        f"    signer:\n      identity: {identity}\n      issuer: {GITHUB_ISSUER}\n"
    )
    eager = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    try:
        with django_capture_on_commit_callbacks(execute=True):
            pointers.pointer_import(path=tmp_path)
        pointers.pointers_settle()
    finally:
        celery_app.conf.task_always_eager = eager

    row = EvidencePointer.objects.get()
    assert row.state in ("pending", "refused")
    assert "over the limit" in row.reason
    assert not Evidence.objects.exists()
