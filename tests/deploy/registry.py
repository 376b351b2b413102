"""A minimal OCI registry for the multi-host test, served from memory on a test host: what the
ingest worker's pull reads (``GET /v2/<repo>/manifests/<digest>``, ``/blobs/<digest>``) and
nothing else (referrers answer 404). Every request is recorded with the address it came from,
so a test knows which worker host pulled which artifact and when; a blob can be held back for a
few seconds, so a fault lands while the pull is in flight."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
EMPTY = b"{}"
REPOSITORY = "aicr-evidence"


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass
class Hit:
    client: str
    path: str
    at: float


@dataclass
class Registry:
    address: str
    port: int = 5000
    blobs: dict[str, bytes] = field(default_factory=dict)
    delays: dict[str, float] = field(default_factory=dict)
    hits: list[Hit] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    @property
    def registry(self) -> str:
        return f"{self.address}:{self.port}"

    def push(self, evidence: bytes, *, hold_seconds: float = 0.0) -> tuple[str, str]:
        """Store ``evidence`` (a tar.gz evidence directory) as a one-layer artifact: (the
        pinned reference a contributor would give, the layer's digest)."""
        layer = _digest(evidence)
        manifest = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": OCI_MANIFEST,
                "artifactType": "application/vnd.aicr.evidence.v1",
                "config": {
                    "mediaType": "application/vnd.oci.empty.v1+json",
                    "digest": _digest(EMPTY),
                    "size": len(EMPTY),
                },
                "layers": [
                    {
                        "mediaType": LAYER,
                        "digest": layer,
                        "size": len(evidence),
                        "annotations": {"org.opencontainers.image.title": "evidence.tar.gz"},
                    }
                ],
            },
            sort_keys=True,
        ).encode()
        self.blobs[layer] = evidence
        self.blobs[_digest(EMPTY)] = EMPTY
        self.blobs[_digest(manifest)] = manifest
        if hold_seconds:
            self.delays[layer] = hold_seconds
        return f"{self.registry}/{REPOSITORY}@{_digest(manifest)}", layer

    def pulls(self, layer: str) -> list[Hit]:
        return [h for h in self.hits if h.path.endswith(f"/blobs/{layer}")]

    def start(self) -> Registry:
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                registry.hits.append(Hit(self.client_address[0], self.path, time.monotonic()))
                prefix = f"/v2/{REPOSITORY}/"
                kind, _, digest = self.path.removeprefix(prefix).partition("/")
                body = registry.blobs.get(digest) if self.path.startswith(prefix) else None
                if self.path == "/v2/":
                    body, kind = b"{}", "root"
                if body is None or kind not in ("manifests", "blobs", "root"):
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                time.sleep(registry.delays.get(digest, 0.0))
                self.send_response(200)
                media = OCI_MANIFEST if kind == "manifests" else "application/octet-stream"
                self.send_header("Content-Type", media)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Docker-Content-Digest", digest)
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer((self.address, self.port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
