"""Kubeconfig texts and a throwaway PKI for the validators_app tests (generated, never real)."""

from __future__ import annotations

import base64
import datetime
import functools
import ipaddress
import json
import socket
import ssl
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

SECRET_TOKEN = "sekrit-token-7f3a9c1e5b2d4086"  # grep responses for this: it must never come back


@dataclass(frozen=True)
class Pki:
    ca_pem: bytes
    server_cert_pem: bytes
    server_key_pem: bytes
    client_cert_pem: bytes
    client_key_pem: bytes


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


@functools.cache
def pki() -> Pki:
    """A CA, a server certificate for 127.0.0.1/localhost and a client certificate."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("test cluster CA"))
        .issuer_name(_name("test cluster CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(common_name: str, usage: x509.ObjectIdentifier, sans: list[x509.GeneralName]):  # type: ignore[no-untyped-def]
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(ca.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                critical=False,
            )
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)

    server_cert, server_key = leaf(
        "127.0.0.1",
        ExtendedKeyUsageOID.SERVER_AUTH,
        [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")],
    )
    client_cert, client_key = leaf("aicr-test-client", ExtendedKeyUsageOID.CLIENT_AUTH, [])
    return Pki(
        ca_pem=ca.public_bytes(serialization.Encoding.PEM),
        server_cert_pem=server_cert,
        server_key_pem=server_key,
        client_cert_pem=client_cert,
        client_key_pem=client_key,
    )


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def kubeconfig(
    *,
    server: str = "http://127.0.0.1:6443",
    cluster: dict[str, Any] | None = None,
    user: dict[str, Any] | None = None,
    context: dict[str, Any] | None = None,
    current_context: str | None = "test",
    extra: dict[str, Any] | None = None,
) -> str:
    """A kubeconfig text: one context "test" → cluster "test-cluster" + user "test-user"."""
    document: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "test-cluster", "cluster": {"server": server, **(cluster or {})}}],
        "users": [
            {"name": "test-user", "user": user if user is not None else {"token": SECRET_TOKEN}}
        ],
        "contexts": [
            {
                "name": "test",
                "context": context
                if context is not None
                else {"cluster": "test-cluster", "user": "test-user"},
            }
        ],
        **(extra or {}),
    }
    if current_context is not None:
        document["current-context"] = current_context
    return yaml.safe_dump(document, sort_keys=False)


def https_kubeconfig(server: str = "https://gpu.example.com:6443", **kwargs: Any) -> str:
    """An https kubeconfig with the test CA embedded (what a real cluster should look like)."""
    cluster = {"certificate-authority-data": b64(pki().ca_pem), **kwargs.pop("cluster", {})}
    return kubeconfig(server=server, cluster=cluster, **kwargs)


def client_certificate_user() -> dict[str, str]:
    return {
        "client-certificate-data": b64(pki().client_cert_pem),
        "client-key-data": b64(pki().client_key_pem),
    }


VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.4",
    "gitCommit": "0" * 40,
    "gitTreeState": "clean",
    "buildDate": "2025-04-22T00:00:00Z",
    "goVersion": "go1.23.8",
    "compiler": "gc",
    "platform": "linux/amd64",
}


class VersionHandler(BaseHTTPRequestHandler):
    """Answers GET /version like a kube-apiserver (and records the Authorization header)."""

    seen_authorization: list[str] = []

    def do_GET(self) -> None:
        self.seen_authorization.append(self.headers.get("Authorization", ""))
        body = json.dumps(VERSION).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def serve_version(*, tls: bool = False) -> Iterator[str]:
    """A loopback server answering /version; with ``tls`` it requires a client certificate
    signed by the test CA. Yields its URL."""
    VersionHandler.seen_authorization = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), VersionHandler)
    if tls:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        with tempfile.TemporaryDirectory() as directory:
            chain = Path(directory, "server.pem")
            chain.write_bytes(pki().server_cert_pem + pki().server_key_pem)
            context.load_cert_chain(chain)
            ca = Path(directory, "ca.pem")
            ca.write_bytes(pki().ca_pem)
            context.load_verify_locations(ca)
        context.verify_mode = ssl.CERT_REQUIRED
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def silent_server() -> Iterator[str]:
    """A loopback port that accepts connections and never answers (a hung API server)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


def closed_port_url() -> str:
    """A loopback URL nothing listens on (connection refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"
