"""A private Sigstore instance for offline tests (as in the team notes' PRIVATE-SIGSTORE.md).

``PrivateSigstore()`` creates a Fulcio-style CA (P-384 root → P-384 intermediate), a CT log key,
and a Rekor v1 log key (all ECDSA), and publishes them as a ``trusted_root.json``. It then issues
Fulcio-profile leaf certificates (empty subject, critical SAN, OIDC issuer extensions
``57264.1.1`` raw + ``57264.1.8`` DER, optional GitHub claims, an embedded precertificate SCT)
and logs signatures as Rekor v1 entries (``dsse/0.0.1`` or ``hashedrekord/0.0.1``) with an
inclusion proof in a Merkle tree, a signed checkpoint and a SET. sigstore-python 4.5.1's
``Verifier.verify_dsse`` / ``verify_artifact`` accept these bundles with the instance's trusted
root through public API only; nothing touches the network.

Key-signed helpers (``generate_key``, ``sign_dsse_with_key``) produce cosign-style v0.3 bundles
with a ``publicKey`` hint and no transparency-log entry (ECDSA P-256 or Ed25519 over the PAE).

TEST-ONLY: every key is generated in memory and thrown away with the instance.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import struct
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import rfc8785
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

IN_TOTO = "application/vnd.in-toto+json"
BUNDLE_V03 = "application/vnd.dev.sigstore.bundle.v0.3+json"
GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
_FULCIO = "1.3.6.1.4.1.57264.1."
_SCT_OID = x509.ObjectIdentifier("1.3.6.1.4.1.11129.2.4.2")

# Claim name -> Fulcio extension number (>= 8: DER UTF8String; 2-6: raw bytes).
CLAIM_OIDS: dict[str, int] = {
    "github_workflow_trigger": 2,
    "github_workflow_sha": 3,
    "github_workflow_name": 4,
    "github_workflow_repository": 5,
    "github_workflow_ref": 6,
    "build_signer_uri": 9,
    "build_signer_digest": 10,
    "runner_environment": 11,
    "source_repository_uri": 12,
    "source_repository_digest": 13,
    "source_repository_ref": 14,
    "source_repository_identifier": 15,
    "source_repository_owner_uri": 16,
    "source_repository_owner_identifier": 17,
    "build_config_uri": 18,
    "build_config_digest": 19,
    "build_trigger": 20,
    "run_invocation_uri": 21,
    "source_repository_visibility_at_signing": 22,
}


# ------------------------------------------------------------------------------------------
# DER / encoding helpers


def _der_len(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    body = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(body)]) + body


def der_octet_string(data: bytes) -> bytes:
    return b"\x04" + _der_len(len(data)) + data


def der_utf8_string(text: str) -> bytes:
    data = text.encode("utf-8")
    return b"\x0c" + _der_len(len(data)) + data


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def spki_der(key: Any) -> bytes:
    return key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def public_pem(key: Any) -> bytes:
    """PEM SubjectPublicKeyInfo of a private or public key."""
    pub = key.public_key() if hasattr(key, "public_key") else key
    return pub.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def pae(payload_type: str, payload: bytes) -> bytes:
    t = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def statement_bytes(statement: dict[str, Any] | bytes | str) -> bytes:
    if isinstance(statement, bytes):
        return statement
    if isinstance(statement, str):
        return statement.encode()
    return json.dumps(statement, sort_keys=True, separators=(",", ":")).encode()


# ------------------------------------------------------------------------------------------
# RFC 6962 Merkle tree


def _leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def _node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def merkle_root(leaves: list[bytes]) -> bytes:
    if len(leaves) == 1:
        return leaves[0]
    k = _split(len(leaves))
    return _node_hash(merkle_root(leaves[:k]), merkle_root(leaves[k:]))


def merkle_path(index: int, leaves: list[bytes]) -> list[bytes]:
    """Audit path for ``leaves[index]`` (already leaf-hashed), ordered leaf to root."""
    if len(leaves) == 1:
        return []
    k = _split(len(leaves))
    if index < k:
        return [*merkle_path(index, leaves[:k]), merkle_root(leaves[k:])]
    return [*merkle_path(index - k, leaves[k:]), merkle_root(leaves[:k])]


# ------------------------------------------------------------------------------------------
# the instance


def _name(org: str, cn: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, org),
            x509.NameAttribute(NameOID.COMMON_NAME, cn),
        ]
    )


def _rfc3339(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class SignedBundle:
    bundle: bytes
    certificate: x509.Certificate
    log_index: int
    integrated_time: int


@dataclass
class PrivateSigstore:
    """A throw-away Sigstore instance (Fulcio CA, CT log, Rekor v1) for tests."""

    name: str = "sigstore.test"
    created: datetime = field(default_factory=lambda: datetime.now(UTC))

    def __post_init__(self) -> None:
        start = self.created - timedelta(days=2)
        self.valid_from = start
        self.root_key = ec.generate_private_key(ec.SECP384R1())
        self.intermediate_key = ec.generate_private_key(ec.SECP384R1())
        self.ct_key = ec.generate_private_key(ec.SECP256R1())
        self.rekor_key = ec.generate_private_key(ec.SECP256R1())
        self.tree_id = int.from_bytes(os.urandom(7), "big")
        self.rekor_origin = f"rekor.{self.name} - {self.tree_id}"
        self.rekor_host = f"rekor.{self.name}"
        self.ct_log_id = hashlib.sha256(spki_der(self.ct_key.public_key())).digest()
        self.rekor_log_id = hashlib.sha256(spki_der(self.rekor_key.public_key())).digest()
        self._next_index = 3 + int.from_bytes(os.urandom(1), "big")

        root_name = _name(self.name, f"{self.name} root")
        self.root_cert = (
            x509.CertificateBuilder()
            .subject_name(root_name)
            .issuer_name(root_name)
            .public_key(self.root_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(start + timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=1), critical=True)
            .add_extension(_ca_key_usage(), critical=True)
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(self.root_key.public_key()),
                critical=False,
            )
            .sign(self.root_key, hashes.SHA384())
        )
        self.intermediate_cert = (
            x509.CertificateBuilder()
            .subject_name(_name(self.name, f"{self.name} intermediate"))
            .issuer_name(root_name)
            .public_key(self.intermediate_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(start + timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_ca_key_usage(), critical=True)
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(self.intermediate_key.public_key()),
                critical=False,
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.root_key.public_key()),
                critical=False,
            )
            .sign(self.root_key, hashes.SHA384())
        )

    # -- trusted root ----------------------------------------------------------------------

    def trusted_root(self) -> dict[str, Any]:
        start = _rfc3339(self.valid_from)

        def log(url: str, key: Any, log_id: bytes) -> dict[str, Any]:
            return {
                "baseUrl": url,
                "hashAlgorithm": "SHA2_256",
                "publicKey": {
                    "rawBytes": b64(spki_der(key.public_key())),
                    "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                    "validFor": {"start": start},
                },
                "logId": {"keyId": b64(log_id)},
            }

        return {
            "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
            "tlogs": [log(f"https://{self.rekor_host}", self.rekor_key, self.rekor_log_id)],
            "certificateAuthorities": [
                {
                    "subject": {"organization": self.name, "commonName": f"{self.name} CA"},
                    "uri": f"https://fulcio.{self.name}",
                    "certChain": {
                        "certificates": [
                            {
                                "rawBytes": b64(
                                    self.intermediate_cert.public_bytes(serialization.Encoding.DER)
                                )
                            },
                            {
                                "rawBytes": b64(
                                    self.root_cert.public_bytes(serialization.Encoding.DER)
                                )
                            },
                        ]
                    },
                    "validFor": {"start": start},
                }
            ],
            "ctlogs": [log(f"https://ctfe.{self.name}/test", self.ct_key, self.ct_log_id)],
            "timestampAuthorities": [],
        }

    def trusted_root_json(self) -> str:
        return json.dumps(self.trusted_root(), indent=2)

    # -- Fulcio ----------------------------------------------------------------------------

    def issue_leaf(
        self,
        *,
        identity: str,
        issuer: str | None,
        when: datetime,
        claims: dict[str, str] | None = None,
        issuer_v2: bool = True,
        issuer_v1: bool = True,
        extra_sans: list[str] | None = None,
        public_key: Any = None,
    ) -> tuple[Any, x509.Certificate]:
        """A Fulcio-profile leaf for ``identity`` (URI, or email when it has '@' and no
        scheme) with an embedded precertificate SCT; for ``public_key`` when given (a Fulcio
        stand-in certifying a client's key; the private key returned is then None)."""
        key = ec.generate_private_key(ec.SECP256R1()) if public_key is None else None
        subject_key = public_key if public_key is not None else key.public_key()
        sans: list[x509.GeneralName] = [_san(identity)] + [_san(s) for s in (extra_sans or [])]
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([]))
            .issuer_name(self.intermediate_cert.subject)
            .public_key(subject_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(when - timedelta(seconds=60))
            .not_valid_after(when + timedelta(minutes=9))
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=False,
                    crl_sign=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False
            )
            .add_extension(x509.SubjectAlternativeName(sans), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(subject_key), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(
                    self.intermediate_key.public_key()
                ),
                critical=False,
            )
        )
        if issuer is not None and issuer_v1:
            builder = builder.add_extension(_ext(1, issuer.encode()), critical=False)
        if issuer is not None and issuer_v2:
            builder = builder.add_extension(_ext(8, der_utf8_string(issuer)), critical=False)
        for claim, value in (claims or {}).items():
            number = CLAIM_OIDS[claim]
            raw = value.encode() if number <= 6 else der_utf8_string(value)
            builder = builder.add_extension(_ext(number, raw), critical=False)

        pre = builder.sign(self.intermediate_key, hashes.SHA384())
        tbs = pre.tbs_certificate_bytes
        sct = self._sct(tbs, when)
        sct_list = struct.pack("!H", len(sct)) + sct
        final = builder.add_extension(
            x509.UnrecognizedExtension(
                _SCT_OID, der_octet_string(struct.pack("!H", len(sct_list)) + sct_list)
            ),
            critical=False,
        ).sign(self.intermediate_key, hashes.SHA384())
        assert final.tbs_precertificate_bytes == tbs
        return key, final

    def _sct(self, tbs: bytes, when: datetime) -> bytes:
        timestamp = int(when.timestamp() * 1000)
        issuer_key_hash = hashlib.sha256(spki_der(self.intermediate_key.public_key())).digest()
        signed = (
            b"\x00\x00"
            + struct.pack("!Q", timestamp)
            + b"\x00\x01"
            + issuer_key_hash
            + len(tbs).to_bytes(3, "big")
            + tbs
            + b"\x00\x00"
        )
        sig = self.ct_key.sign(signed, ec.ECDSA(hashes.SHA256()))
        return (
            b"\x00"
            + self.ct_log_id
            + struct.pack("!Q", timestamp)
            + b"\x00\x00"
            + b"\x04\x03"
            + struct.pack("!H", len(sig))
            + sig
        )

    # -- Rekor v1 --------------------------------------------------------------------------

    def _log_entry(
        self, body: bytes, *, kind: str, integrated_time: int, tree_size: int | None = None
    ) -> tuple[dict[str, Any], int]:
        index = self._next_index
        self._next_index += 1
        size = tree_size or index + 1 + int.from_bytes(os.urandom(1), "big") % 5
        leaves = [_leaf_hash(hashlib.sha256(b"filler %d" % i).digest()) for i in range(size)]
        leaves[index] = _leaf_hash(body)
        root = merkle_root(leaves)
        proof = merkle_path(index, leaves)
        note = f"{self.rekor_origin}\n{size}\n{b64(root)}\n"
        note_sig = self.rekor_key.sign(note.encode(), ec.ECDSA(hashes.SHA256()))
        checkpoint = (
            note + "\n" + f"\u2014 {self.rekor_host} {b64(self.rekor_log_id[:4] + note_sig)}\n"
        )
        set_payload = rfc8785.dumps(
            {
                "body": b64(body),
                "integratedTime": integrated_time,
                "logID": self.rekor_log_id.hex(),
                "logIndex": index,
            }
        )
        set_sig = self.rekor_key.sign(set_payload, ec.ECDSA(hashes.SHA256()))
        entry = {
            "logIndex": str(index),
            "logId": {"keyId": b64(self.rekor_log_id)},
            "kindVersion": {"kind": kind, "version": "0.0.1"},
            "integratedTime": str(integrated_time),
            "inclusionPromise": {"signedEntryTimestamp": b64(set_sig)},
            "inclusionProof": {
                "logIndex": str(index),
                "rootHash": b64(root),
                "treeSize": str(size),
                "hashes": [b64(h) for h in proof],
                "checkpoint": {"envelope": checkpoint},
            },
            "canonicalizedBody": b64(body),
        }
        return entry, index

    # -- signing ---------------------------------------------------------------------------

    def sign_dsse(
        self,
        statement: dict[str, Any] | bytes | str,
        *,
        identity: str,
        issuer: str | None = GITHUB_ISSUER,
        when: datetime | None = None,
        payload_type: str = IN_TOTO,
        claims: dict[str, str] | None = None,
        **leaf_options: Any,
    ) -> SignedBundle:
        """Sign an in-toto statement keyless-style as (identity, issuer); a v0.3 bundle with a
        Rekor v1 ``dsse/0.0.1`` entry."""
        when = when or (datetime.now(UTC) - timedelta(minutes=1))
        key, cert = self.issue_leaf(
            identity=identity, issuer=issuer, when=when, claims=claims, **leaf_options
        )
        payload = statement_bytes(statement)
        signature = key.sign(pae(payload_type, payload), ec.ECDSA(hashes.SHA256()))
        envelope = {
            "payload": b64(payload),
            "payloadType": payload_type,
            "signatures": [{"sig": b64(signature)}],
        }
        body = rfc8785.dumps(
            {
                "apiVersion": "0.0.1",
                "kind": "dsse",
                "spec": {
                    "envelopeHash": {
                        "algorithm": "sha256",
                        "value": hashlib.sha256(
                            json.dumps(envelope, sort_keys=True).encode()
                        ).hexdigest(),
                    },
                    "payloadHash": {
                        "algorithm": "sha256",
                        "value": hashlib.sha256(payload).hexdigest(),
                    },
                    "signatures": [
                        {
                            "signature": b64(signature),
                            "verifier": b64(cert.public_bytes(serialization.Encoding.PEM)),
                        }
                    ],
                },
            }
        )
        integrated = int(when.timestamp())
        entry, index = self._log_entry(body, kind="dsse", integrated_time=integrated)
        bundle = {
            "mediaType": BUNDLE_V03,
            "verificationMaterial": {
                "certificate": {"rawBytes": b64(cert.public_bytes(serialization.Encoding.DER))},
                "tlogEntries": [entry],
            },
            "dsseEnvelope": envelope,
        }
        return SignedBundle(
            bundle=json.dumps(bundle, indent=2).encode(),
            certificate=cert,
            log_index=index,
            integrated_time=integrated,
        )

    def sign_message(
        self,
        artifact: bytes,
        *,
        identity: str,
        issuer: str | None = GITHUB_ISSUER,
        when: datetime | None = None,
        claims: dict[str, str] | None = None,
    ) -> SignedBundle:
        """A keyless message signature (``hashedrekord/0.0.1``) over ``artifact``."""
        when = when or (datetime.now(UTC) - timedelta(minutes=1))
        key, cert = self.issue_leaf(identity=identity, issuer=issuer, when=when, claims=claims)
        digest = hashlib.sha256(artifact).digest()
        signature = key.sign(artifact, ec.ECDSA(hashes.SHA256()))
        body = rfc8785.dumps(
            {
                "apiVersion": "0.0.1",
                "kind": "hashedrekord",
                "spec": {
                    "data": {"hash": {"algorithm": "sha256", "value": digest.hex()}},
                    "signature": {
                        "content": b64(signature),
                        "publicKey": {
                            "content": b64(cert.public_bytes(serialization.Encoding.PEM))
                        },
                    },
                },
            }
        )
        integrated = int(when.timestamp())
        entry, index = self._log_entry(body, kind="hashedrekord", integrated_time=integrated)
        bundle = {
            "mediaType": BUNDLE_V03,
            "verificationMaterial": {
                "certificate": {"rawBytes": b64(cert.public_bytes(serialization.Encoding.DER))},
                "tlogEntries": [entry],
            },
            "messageSignature": {
                "messageDigest": {"algorithm": "SHA2_256", "digest": b64(digest)},
                "signature": b64(signature),
            },
        }
        return SignedBundle(
            bundle=json.dumps(bundle, indent=2).encode(),
            certificate=cert,
            log_index=index,
            integrated_time=integrated,
        )

    def attest(
        self,
        statement: dict[str, Any] | bytes | str,
        *,
        identity: str,
        issuer: str = GITHUB_ISSUER,
        **kw: Any,
    ) -> tuple[bytes, str]:
        """(bundle bytes, trusted_root JSON) for ``statement`` signed as (identity, issuer)."""
        return self.sign_dsse(
            statement, identity=identity, issuer=issuer, **kw
        ).bundle, self.trusted_root_json()


def _ca_key_usage() -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=False,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=True,
        crl_sign=True,
        encipher_only=False,
        decipher_only=False,
    )


def _ext(number: int, value: bytes) -> x509.UnrecognizedExtension:
    return x509.UnrecognizedExtension(x509.ObjectIdentifier(f"{_FULCIO}{number}"), value)


def _san(identity: str) -> x509.GeneralName:
    if "@" in identity and "://" not in identity:
        return x509.RFC822Name(identity)
    return x509.UniformResourceIdentifier(identity)


# ------------------------------------------------------------------------------------------
# key-signed DSSE (cosign --key style)


def generate_key(kind: str = "ecdsa-p256") -> Any:
    if kind == "ecdsa-p256":
        return ec.generate_private_key(ec.SECP256R1())
    if kind == "ed25519":
        return ed25519.Ed25519PrivateKey.generate()
    raise ValueError(kind)


def key_hint(key: Any) -> str:
    pub = key.public_key() if hasattr(key, "public_key") else key
    return b64(hashlib.sha256(spki_der(pub)).digest())


def sign_dsse_with_key(
    statement: dict[str, Any] | bytes | str,
    key: Any,
    *,
    payload_type: str = IN_TOTO,
    hint: bool = True,
) -> bytes:
    """A v0.3 key-signed DSSE bundle (publicKey hint, no tlog entry), as cosign writes it."""
    payload = statement_bytes(statement)
    message = pae(payload_type, payload)
    if isinstance(key, ed25519.Ed25519PrivateKey):
        signature = key.sign(message)
    else:
        signature = key.sign(message, ec.ECDSA(hashes.SHA256()))
    bundle = {
        "mediaType": BUNDLE_V03,
        "verificationMaterial": {
            "publicKey": {"hint": key_hint(key) if hint else ""},
            "tlogEntries": [],
            "timestampVerificationData": {},
        },
        "dsseEnvelope": {
            "payload": b64(payload),
            "payloadType": payload_type,
            "signatures": [{"sig": b64(signature), "keyid": ""}],
        },
    }
    return json.dumps(bundle, indent=2).encode()
