"""Key-signed DSSE evidence (ECDSA P-256, Ed25519) against registered public keys."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from evidence_app.verification import parse_statement, verify_keyed, verify_signature
from tests.shared_data import GOLDEN, SHARED
from tests.sigstore_private import generate_key, key_hint, public_pem, sign_dsse_with_key, spki_der

STATEMENT = (
    GOLDEN / "generated/evidence-example-full/summary-bundle/statement.intoto.json"
).read_bytes()
RECIPE_DIGEST = json.loads(STATEMENT)["subject"][0]["digest"]["sha256"]


@pytest.mark.parametrize("kind", ["ecdsa-p256", "ed25519"])
def test_it_verifies_aicr_evidence_signed_with_a_registered_key(kind: str) -> None:
    key = generate_key(kind)
    other = generate_key("ecdsa-p256")
    bundle = sign_dsse_with_key(STATEMENT, key)
    outcome = verify_keyed(
        bundle,
        public_keys={"other": public_pem(other), "contributor-1": public_pem(key)},
        artifact_sha256=RECIPE_DIGEST,
    )
    assert outcome.status == "ok", outcome.detail
    assert outcome.mode == "key"
    assert outcome.signer is not None
    assert outcome.signer.key_id == "contributor-1"
    assert outcome.signer.key_index == 1
    assert outcome.signer.key_fingerprint == hashlib.sha256(spki_der(key.public_key())).hexdigest()
    assert outcome.signer.identity is None
    assert parse_statement(outcome.payload).recipe_name == "h100-eks-ubuntu-training-kubeflow"


@pytest.mark.parametrize("kind", ["ecdsa-p256", "ed25519"])
def test_it_rejects_tampering_and_unregistered_keys(kind: str) -> None:
    key = generate_key(kind)
    bundle = json.loads(sign_dsse_with_key(STATEMENT, key))
    good = json.dumps(bundle).encode()
    unregistered = verify_keyed(good, public_keys=[public_pem(generate_key(kind))])
    assert unregistered.status == "invalid"
    tampered = json.loads(good)
    tampered["dsseEnvelope"]["payload"] = base64.b64encode(
        STATEMENT.replace(b'"passed":0', b'"passed":1', 1)
    ).decode()
    outcome = verify_keyed(json.dumps(tampered).encode(), public_keys=[public_pem(key)])
    assert outcome.status == "invalid"
    assert "does not verify" in outcome.detail
    retyped = json.loads(good)
    retyped["dsseEnvelope"]["payloadType"] = "application/json"
    assert (
        verify_keyed(json.dumps(retyped).encode(), public_keys=[public_pem(key)]).status
        == "invalid"
    )
    wrong_artifact = verify_keyed(good, public_keys=[public_pem(key)], artifact=b"another recipe")
    assert wrong_artifact.status == "invalid"
    assert "not among the in-toto subjects" in wrong_artifact.detail


def test_it_treats_the_key_hint_as_unauthenticated() -> None:
    key, decoy = generate_key(), generate_key()
    doc: dict[str, Any] = json.loads(sign_dsse_with_key(STATEMENT, key))
    doc["verificationMaterial"]["publicKey"]["hint"] = key_hint(decoy)
    outcome = verify_keyed(
        json.dumps(doc).encode(), public_keys=[public_pem(decoy), public_pem(key)]
    )
    assert outcome.status == "ok"
    assert outcome.signer is not None
    assert outcome.signer.key_index == 1
    outcome = verify_keyed(json.dumps(doc).encode(), public_keys=[public_pem(decoy)])
    assert outcome.status == "invalid"


def test_it_verifies_a_bare_dsse_envelope() -> None:
    key = generate_key("ed25519")
    envelope = json.loads(sign_dsse_with_key(STATEMENT, key))["dsseEnvelope"]
    outcome = verify_signature(json.dumps(envelope).encode(), public_keys=[public_pem(key)])
    assert outcome.status == "ok", outcome.detail


def test_it_needs_a_usable_registered_key() -> None:
    bundle = sign_dsse_with_key(STATEMENT, generate_key())
    assert verify_keyed(bundle, public_keys=[]).status == "invalid"
    assert "no registered public key" in verify_keyed(bundle, public_keys=[]).detail
    broken = verify_keyed(
        bundle, public_keys=[b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"]
    )
    assert broken.status == "invalid"
    assert "cannot load public key" in broken.detail
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    p384 = ec.generate_private_key(ec.SECP384R1())
    outcome = verify_keyed(bundle, public_keys=[public_pem(rsa_key), public_pem(p384)])
    assert outcome.status == "unsupported"
    assert "unsupported key type" in outcome.detail


def test_it_refuses_keyless_bundles_in_key_mode() -> None:
    fixture = SHARED / "fixtures/sigstore/keyless-dsse-happy/bundle.sigstore.json"
    outcome = verify_keyed(fixture.read_bytes(), public_keys=[public_pem(generate_key())])
    assert outcome.status == "invalid"
    assert "certificate" in outcome.detail


def test_it_checks_key_signed_message_signatures_against_the_artifact() -> None:
    case = SHARED / "fixtures/sigstore/key-msgsig-conformance"
    bundle = (case / "bundle.sigstore.json").read_bytes()
    pem = (case / "key.pub").read_bytes()
    artifact = (case / "artifact").read_bytes()
    assert verify_keyed(bundle, public_keys=[pem], artifact=artifact).status == "ok"
    assert verify_keyed(bundle, public_keys=[pem], artifact=artifact + b"x").status == "invalid"
    assert verify_keyed(bundle, public_keys=[pem]).status == "unsupported"
