"""``/api/v1/keys/``: maintainers register public keys (201 with the fingerprint the service
computes; 400 naming the field and the problem, nothing stored; 409 for a key registered
already), maintainers and auditors list them; the evidence such a key signs then verifies and
counts."""

from __future__ import annotations

import hashlib
import html
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed448, rsa
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from evidence_app.models import Evidence, SigningKey
from evidence_app.services import keys
from evidence_app.verification.commands import KEY_SIGNED_UPSTREAM_NOTE
from recipes_app.models import Recipe
from tests.evidence_factories import example_statement, signed_example_tarball
from tests.sigstore_private import generate_key, public_pem, sign_dsse_with_key

Api = Callable[[str | None], Client]
FIXTURE_KEY = (
    Path(__file__).resolve().parents[1] / "data/fixtures/sigstore/key-dsse-ecdsa-p256/key.pub"
)


@pytest.fixture
def maintainer(make_token: Callable[..., str]) -> str:
    return make_token("maya", "maintainer")


def _pem(key: Any) -> str:
    return public_pem(key).decode()


def _register(client: Client, name: str, public_key: Any) -> Any:
    return client.post(
        "/api/v1/keys/", {"name": name, "public_key": public_key}, content_type="application/json"
    )


def test_it_registers_the_fixture_key_with_the_services_fingerprint(
    api: Api, maintainer: str
) -> None:
    pem = FIXTURE_KEY.read_text()

    response = _register(api(maintainer), "lab KMS key", pem)

    assert response.status_code == 201, response.content
    body = response.json()
    expected = keys.public_key_inspect(pem)
    assert body["fingerprint"] == expected.fingerprint
    assert (body["name"], body["algorithm"]) == ("lab KMS key", "ecdsa-p256")
    assert {"id", "registered_at", "key_pub_url"} <= set(body)
    assert body["key_pub_url"] is None  # no evidence of it yet, so no signer's key.pub
    key = SigningKey.objects.get()
    assert (key.pk, key.fingerprint, key.registered_by.username) == (
        body["id"],
        expected.fingerprint,
        "maya",
    )


@pytest.mark.parametrize("kind", ["ecdsa-p256", "ed25519"])
def test_it_registers_a_key_generated_here(api: Api, maintainer: str, kind: str) -> None:
    private = generate_key(kind)
    public = private.public_key()
    der = public.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    response = _register(api(maintainer), kind, _pem(private))

    assert response.status_code == 201, response.content
    assert response.json()["fingerprint"] == hashlib.sha256(der).hexdigest()
    assert response.json()["algorithm"] == kind


def test_it_accepts_multipart_with_the_key_as_a_file(api: Api, maintainer: str) -> None:
    pem = FIXTURE_KEY.read_bytes()

    response = api(maintainer).post(
        "/api/v1/keys/",
        {"name": "from a file", "public_key": SimpleUploadedFile("key.pub", pem)},
    )

    assert response.status_code == 201, response.content
    assert response.json()["fingerprint"] == keys.public_key_inspect(pem).fingerprint


BAD_KEYS = [
    ("", "public_key", "Paste a PEM public key"),
    ("   \n", "public_key", "Paste a PEM public key"),
    ("-----BEGIN PRIVATE KEY-----\nMC4CAQ\n-----END PRIVATE KEY-----\n", "public_key", "private"),
    ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA", "public_key", "PEM starts with"),
    ("-----BEGIN PUBLIC KEY-----\nnot base64\n-----END PUBLIC KEY-----", "public_key", "Not a PEM"),
    ("-----BEGIN PUBLIC KEY-----\nMFkw\x07\n-----END PUBLIC KEY-----", "public_key", "'\\x07'"),
    ("-----BEGIN PUBLIC KEY-----\nMFkwé\n-----END PUBLIC KEY-----", "public_key", "non-ASCII"),
    ("x" * 5000, "public_key", "too long"),
    ("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----", "public_key", "certificate"),
]


@pytest.mark.parametrize(("pem", "field", "message"), BAD_KEYS)
def test_it_refuses_a_bad_key_naming_the_problem(
    api: Api, maintainer: str, pem: str, field: str, message: str
) -> None:
    response = _register(api(maintainer), "bad", pem)

    assert response.status_code == 400, response.content
    body = response.json()
    assert body["field"] == field
    assert message in body["detail"], body
    assert not SigningKey.objects.exists()


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048), "RSA 2048-bit"),
        (lambda: ec.generate_private_key(ec.SECP384R1()), "curve secp384r1"),
        (lambda: ed448.Ed448PrivateKey.generate(), "Ed448"),
        (lambda: dsa.generate_private_key(key_size=2048), "DSA 2048-bit"),
    ],
    ids=["rsa", "p384", "ed448", "dsa"],
)
def test_it_names_the_unsupported_algorithm(
    api: Api, maintainer: str, make: Callable[[], Any], named: str
) -> None:
    response = _register(api(maintainer), "other", _pem(make()))

    assert response.status_code == 400
    detail = response.json()["detail"]
    assert "Only ECDSA P-256 and Ed25519" in detail
    assert named in detail, detail
    assert not SigningKey.objects.exists()


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "Give the key a name"),
        ("  ", "Give the key a name"),
        ("n" * 201, "at most 200 characters"),
        ("lab\nkey", "one line"),
        ("lab\x1bkey", "'\\x1b'"),
    ],
)
def test_it_refuses_a_bad_name(api: Api, maintainer: str, name: str, message: str) -> None:
    response = _register(api(maintainer), name, FIXTURE_KEY.read_text())

    assert response.status_code == 400, response.content
    assert response.json()["field"] == "name"
    assert message in response.json()["detail"], response.json()
    assert not SigningKey.objects.exists()


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("public_key", "-----BEGIN PUBLIC KEY-----\nMFkw\x00\n-----END PUBLIC KEY-----", "NUL"),
        ("name", "lab\x00key", "NUL"),
        ("name", "lab\ud800", "surrogate"),
    ],
)
def test_it_refuses_unstorable_text_in_json_naming_the_field(
    api: Api, maintainer: str, field: str, value: str, problem: str
) -> None:
    body = {"name": "lab", "public_key": FIXTURE_KEY.read_text(), field: value}

    response = api(maintainer).post("/api/v1/keys/", body, content_type="application/json")

    assert response.status_code == 400
    detail = response.json()["detail"]
    assert f"{field} contains" in detail, detail
    assert problem in detail
    assert not SigningKey.objects.exists()


@pytest.mark.parametrize("field", ["name", "public_key"])
def test_it_refuses_a_nul_in_a_multipart_field(api: Api, maintainer: str, field: str) -> None:
    body = {"name": "lab", "public_key": FIXTURE_KEY.read_text(), field: "a\x00b"}

    response = api(maintainer).post("/api/v1/keys/", body)

    assert response.status_code == 400
    assert response.json()["field"] == field
    assert "Null characters" in response.json()["detail"]
    assert not SigningKey.objects.exists()


@pytest.mark.parametrize(
    "body", [{"name": "no key"}, {"public_key": "x"}, {"name": 3, "public_key": ["x"]}]
)
def test_it_refuses_a_body_missing_or_mistyping_a_field(
    api: Api, maintainer: str, body: dict[str, Any]
) -> None:
    response = api(maintainer).post("/api/v1/keys/", body, content_type="application/json")

    assert response.status_code == 400
    assert response.json()["field"] in ("name", "public_key")
    assert not SigningKey.objects.exists()


def test_it_refuses_a_json_body_that_is_not_an_object(api: Api, maintainer: str) -> None:
    response = api(maintainer).post("/api/v1/keys/", ["x"], content_type="application/json")

    assert response.status_code == 400
    assert "JSON object" in response.json()["detail"]


def test_it_answers_409_naming_the_key_registered_already(api: Api, maintainer: str) -> None:
    private = generate_key("ecdsa-p256")
    first = _register(api(maintainer), "first", _pem(private)).json()
    # The same key in another PEM layout (no line breaks inside the base64) is the same key.
    lines = _pem(private).strip().splitlines()
    other_layout = "\n".join([lines[0], "".join(lines[1:-1]), lines[-1]]) + "\n"

    again = _register(api(maintainer), "second", other_layout)

    assert again.status_code == 409, again.content
    body = again.json()
    assert "already registered as 'first'" in body["detail"]
    assert body["existing"]["id"] == first["id"]
    assert body["existing"]["fingerprint"] == first["fingerprint"]
    assert SigningKey.objects.count() == 1


def test_it_refuses_a_revoked_key_again_and_keeps_it_revoked(api: Api, maintainer: str) -> None:
    private = generate_key("ed25519")
    keys.signing_key_revoke(
        key=keys.signing_key_register(name="old", public_key_pem=public_pem(private))
    )

    again = _register(api(maintainer), "again", _pem(private))

    assert again.status_code == 409
    assert "revoked" in again.json()["detail"]
    assert again.json()["existing"]["revoked_at"] is not None
    assert SigningKey.objects.get().revoked_at is not None


@pytest.mark.parametrize(
    ("role", "status"), [(None, 401), ("contributor", 403), ("auditor", 403), ("maintainer", 201)]
)
def test_only_maintainers_register(
    api: Api, make_token: Callable[..., str], role: str | None, status: int
) -> None:
    token = make_token(f"u-{role}", role) if role else None

    response = _register(api(token), "lab", FIXTURE_KEY.read_text())

    assert response.status_code == status
    assert SigningKey.objects.exists() is (status == 201)


@pytest.mark.parametrize(
    ("role", "status"), [(None, 401), ("contributor", 403), ("auditor", 200), ("maintainer", 200)]
)
def test_maintainers_and_auditors_list_keys(
    api: Api, make_token: Callable[..., str], role: str | None, status: int
) -> None:
    keys.signing_key_register(name="lab", public_key_pem=FIXTURE_KEY.read_text())
    token = make_token(f"u-{role}", role) if role else None

    response = api(token).get("/api/v1/keys/")

    assert response.status_code == status
    if status == 200:
        (row,) = response.json()["results"]
        assert row["public_key"] == keys.public_key_inspect(FIXTURE_KEY.read_text()).pem
        assert "private" not in str(row).lower()


def test_evidence_signed_by_a_key_registered_here_verifies_and_counts(
    api: Api,
    maintainer: str,
    make_token: Callable[..., str],
    example_recipe: Recipe,
) -> None:
    private = generate_key("ecdsa-p256")
    tarball = signed_example_tarball(sign_dsse_with_key(example_statement(), private))
    contributor = api(make_token("carl", "contributor"))

    def upload() -> Any:
        files = {"bundle": SimpleUploadedFile("evidence.tar.gz", tarball)}
        return contributor.post("/api/v1/evidence/", files)

    refused = upload()
    assert refused.status_code == 422
    assert "no registered key matched" in refused.json()["reason"]

    registered = _register(api(maintainer), "operator KMS key", _pem(private))
    assert registered.status_code == 201

    accepted = upload()
    assert accepted.status_code == 201, accepted.content
    assert accepted.json()["signer"]["class"] == "registered-key"
    evidence = Evidence.objects.get(pk=accepted.json()["id"])
    assert evidence.signer.key_id == registered.json()["id"]
    assert Evidence.objects.counted().filter(pk=evidence.pk).exists()
    listed = api(maintainer).get("/api/v1/keys/").json()["results"][0]
    assert listed["key_pub_url"].endswith(f"/signers/{evidence.signer.slug}/key.pub")
    key_pub = Client().get(listed["key_pub_url"])
    assert key_pub.status_code == 200
    assert key_pub.content.decode() == _pem(private)
    detail = Client().get(f"/api/v1/evidence/{evidence.pk}/").json()
    tools = [c["tool"] for c in detail["verify_commands"]]
    assert tools == ["aicr", "cosign"]
    aicr = detail["verify_commands"][0]
    assert aicr["text"].startswith("aicr evidence verify ")
    assert "--key key.pub" in aicr["text"]
    assert "AICR v1.1+" in aicr["note"]
    cosign = detail["verify_commands"][1]
    assert KEY_SIGNED_UPSTREAM_NOTE in cosign["note"]
    page = Client().get(f"/evidence/{evidence.pk}/").content.decode()
    assert "aicr evidence verify ./summary-bundle --key key.pub" in page
    assert "AICR v1.1+" in page
    assert html.escape(KEY_SIGNED_UPSTREAM_NOTE) in page
