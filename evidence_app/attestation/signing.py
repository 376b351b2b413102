"""Key-signed DSSE bundles for a statement, and the signed bundle as a ``summary-bundle`` tarball.

The signature is a cosign-style Sigstore bundle v0.3 (``publicKey.hint`` = base64 sha256 of
the DER public key, no transparency-log entry) over DSSE's PAE of the statement, ECDSA P-256
with RFC 6979 nonces, so the same key and statement give the same bytes. Key-signed evidence
counts on this site only where a maintainer registered the key; AICR's own evidence gate
accepts keyless (Fulcio certificate) signatures only.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import tarfile
from collections.abc import Mapping

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from evidence_app.verification.keyed import pae

IN_TOTO = "application/vnd.in-toto+json"
BUNDLE_V03 = "application/vnd.dev.sigstore.bundle.v0.3+json"
ATTESTATION = "attestation.intoto.jsonl"
ROOT = "summary-bundle"


def key_hint(key: ec.EllipticCurvePrivateKey) -> str:
    der = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


def sign_statement(statement: bytes, key: ec.EllipticCurvePrivateKey) -> bytes:
    """A cosign-style v0.3 key-signed DSSE bundle (publicKey hint, no tlog), RFC 6979."""
    signature = key.sign(
        pae(IN_TOTO, statement), ec.ECDSA(hashes.SHA256(), deterministic_signing=True)
    )
    bundle = {
        "mediaType": BUNDLE_V03,
        "verificationMaterial": {
            "publicKey": {"hint": key_hint(key)},
            "tlogEntries": [],
            "timestampVerificationData": {},
        },
        "dsseEnvelope": {
            "payload": base64.b64encode(statement).decode(),
            "payloadType": IN_TOTO,
            "signatures": [{"sig": base64.b64encode(signature).decode(), "keyid": ""}],
        },
    }
    return json.dumps(bundle, separators=(",", ":")).encode()


def summary_tarball(files: Mapping[str, bytes], signed_bundle: bytes | None) -> bytes:
    """``summary-bundle/…`` as tar.gz with fixed metadata (same input, same bytes)."""
    members = dict(files)
    if signed_bundle is not None:
        members[ATTESTATION] = signed_bundle.rstrip(b"\n") + b"\n"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(members):
            info = tarfile.TarInfo(f"{ROOT}/{name}")
            info.size = len(members[name])
            info.mtime = 0
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(members[name]))
    return gzip.compress(buf.getvalue(), mtime=0)
