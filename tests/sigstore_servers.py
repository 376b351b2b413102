"""Loopback Fulcio and Rekor v1 stand-ins on a ``PrivateSigstore``, so sigstore-python can sign
keyless in tests (no network, no public-good instance).

Faithful where a signer can tell: the Fulcio stand-in answers ``POST /api/v2/signingCert``
only for an ES256 identity token its OIDC issuer signed (audience ``sigstore``, not expired) and
a CSR whose self-signature holds, and certifies the CSR's key for the token's identity (``sub``)
and issuer, with an SCT from the instance's CT log; the Rekor stand-in answers ``POST
/api/v1/log/entries`` for a ``dsse/0.0.1`` proposal only when the envelope's signature verifies
with the certificate it names, and returns an entry with an inclusion proof, a signed
checkpoint and a signed entry timestamp (Rekor's v1 API response shape).
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import rfc8785
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tests.sigstore_private import PrivateSigstore, pae

OIDC_ISSUER = "https://oidc.aicr-dashboard-tests.test"
RUNS_IDENTITY = (
    "https://github.com/example/aicr-dashboard/.github/workflows/runs.yaml@refs/heads/main"
)


@dataclass
class TestOidcIssuer:
    """An OIDC provider that signs identity tokens (ES256) for whoever a test names."""

    url: str = OIDC_ISSUER
    key: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1())
    )

    def token(
        self,
        *,
        identity: str = RUNS_IDENTITY,
        audience: str = "sigstore",
        lifetime: timedelta = timedelta(minutes=10),
        key: ec.EllipticCurvePrivateKey | None = None,
    ) -> str:
        now = datetime.now(UTC)
        claims = {
            "iss": self.url,
            "aud": audience,
            "sub": identity,
            "iat": int((now - timedelta(seconds=30)).timestamp()),
            "nbf": int((now - timedelta(seconds=30)).timestamp()),
            "exp": int((now + lifetime).timestamp()),
        }
        return jwt.encode(claims, key or self.key, algorithm="ES256")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _hex_of_b64(value: str) -> str:
    return base64.b64decode(value).hex()


class _Handler(BaseHTTPRequestHandler):
    server: _StandIns  # type: ignore[assignment]

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _reply(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:  # http.server calls it by this name
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length))
        except ValueError:
            self._reply(400, {"message": "body is not JSON"})
            return
        self.server.requests.append(self.path)
        if self.path == "/api/v2/signingCert":
            status, answer = self.server.fulcio(body, self.headers.get("Authorization", ""))
        elif self.path == "/api/v1/log/entries":
            status, answer = self.server.rekor(body)
        else:
            status, answer = 404, {"message": f"no route {self.path}"}
        self._reply(status, answer)


class _StandIns(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, sigstore: PrivateSigstore, oidc: TestOidcIssuer) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.sigstore = sigstore
        self.oidc = oidc
        self.requests: list[str] = []
        self.lock = threading.Lock()

    # -- Fulcio ---------------------------------------------------------------------------

    def fulcio(self, body: dict[str, Any], authorization: str) -> tuple[int, dict[str, Any]]:
        token = authorization.removeprefix("Bearer ").strip()
        try:
            claims = jwt.decode(
                token,
                self.oidc.key.public_key(),
                algorithms=["ES256"],
                audience="sigstore",
                issuer=self.oidc.url,
            )
        except jwt.PyJWTError as exc:
            return 401, {"message": f"invalid identity token: {exc}"}
        try:
            pem = base64.b64decode(body["certificateSigningRequest"])
            csr = x509.load_pem_x509_csr(pem)
        except (KeyError, ValueError, TypeError) as exc:
            return 400, {"message": f"bad certificate signing request: {exc}"}
        if not csr.is_signature_valid:
            return 400, {"message": "proof of possession failed"}
        with self.lock:
            _, leaf = self.sigstore.issue_leaf(
                identity=str(claims["sub"]),
                issuer=str(claims["iss"]),
                when=datetime.now(UTC),
                public_key=csr.public_key(),
            )
        chain = [leaf, self.sigstore.intermediate_cert, self.sigstore.root_cert]
        pems = [c.public_bytes(serialization.Encoding.PEM).decode() for c in chain]
        return 201, {"signedCertificateEmbeddedSct": {"chain": {"certificates": pems}}}

    # -- Rekor v1 -------------------------------------------------------------------------

    def rekor(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        try:
            if (body.get("kind"), body.get("apiVersion")) != ("dsse", "0.0.1"):
                return 400, {"message": "only dsse/0.0.1 entries are accepted here"}
            proposed = body["spec"]["proposedContent"]
            envelope = json.loads(proposed["envelope"])
            verifier = base64.b64decode(proposed["verifiers"][0])
            cert = x509.load_pem_x509_certificate(verifier)
            payload = base64.b64decode(envelope["payload"])
            signature = base64.b64decode(envelope["signatures"][0]["sig"])
            key = cert.public_key()
            assert isinstance(key, ec.EllipticCurvePublicKey)
            key.verify(signature, pae(envelope["payloadType"], payload), ec.ECDSA(hashes.SHA256()))
        except Exception as exc:  # any bad proposal is a 400, as Rekor answers
            return 400, {"message": f"invalid dsse proposal: {type(exc).__name__}: {exc}"}
        canonical = rfc8785.dumps(
            {
                "apiVersion": "0.0.1",
                "kind": "dsse",
                "spec": {
                    "envelopeHash": {
                        "algorithm": "sha256",
                        "value": hashlib.sha256(rfc8785.dumps(envelope)).hexdigest(),
                    },
                    "payloadHash": {
                        "algorithm": "sha256",
                        "value": hashlib.sha256(payload).hexdigest(),
                    },
                    "signatures": [
                        {"signature": envelope["signatures"][0]["sig"], "verifier": _b64(verifier)}
                    ],
                },
            }
        )
        with self.lock:
            entry, index = self.sigstore._log_entry(
                canonical, kind="dsse", integrated_time=int(datetime.now(UTC).timestamp())
            )
        proof = entry["inclusionProof"]
        return 201, {
            uuid.uuid4().hex: {
                "body": entry["canonicalizedBody"],
                "integratedTime": int(entry["integratedTime"]),
                "logID": _hex_of_b64(entry["logId"]["keyId"]),
                "logIndex": index,
                "verification": {
                    "inclusionProof": {
                        "checkpoint": proof["checkpoint"]["envelope"],
                        "hashes": [_hex_of_b64(h) for h in proof["hashes"]],
                        "logIndex": index,
                        "rootHash": _hex_of_b64(proof["rootHash"]),
                        "treeSize": int(proof["treeSize"]),
                    },
                    "signedEntryTimestamp": entry["inclusionPromise"]["signedEntryTimestamp"],
                },
            }
        }


@dataclass
class LoopbackSigstore:
    """The running stand-ins: ``url`` serves both Fulcio and Rekor paths."""

    sigstore: PrivateSigstore
    oidc: TestOidcIssuer
    server: _StandIns

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def requests(self) -> list[str]:
        return self.server.requests

    def client_trust_config(self) -> str:
        """A ClientTrustConfig: the instance's trusted root and a signing config for ``url``."""
        start = (self.sigstore.valid_from).strftime("%Y-%m-%dT%H:%M:%SZ")

        def service(url: str) -> dict[str, Any]:
            return {
                "url": url,
                "majorApiVersion": 1,
                "validFor": {"start": start},
                "operator": "aicr-dashboard-tests",
            }

        return json.dumps(
            {
                "mediaType": "application/vnd.dev.sigstore.clienttrustconfig.v0.1+json",
                "trustedRoot": self.sigstore.trusted_root(),
                "signingConfig": {
                    "mediaType": "application/vnd.dev.sigstore.signingconfig.v0.2+json",
                    "caUrls": [service(self.url)],
                    "oidcUrls": [],
                    "rekorTlogUrls": [service(self.url)],
                    "tsaUrls": [],
                    "rekorTlogConfig": {"selector": "ANY"},
                    "tsaConfig": {"selector": "ANY"},
                },
            }
        )


@contextmanager
def loopback_sigstore(
    sigstore: PrivateSigstore, oidc: TestOidcIssuer | None = None
) -> Iterator[LoopbackSigstore]:
    server = _StandIns(sigstore, oidc or TestOidcIssuer())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield LoopbackSigstore(sigstore=sigstore, oidc=server.oidc, server=server)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
