"""``/api/v1/evidence/`` (upload, list, detail, bundle), ``/api/v1/signers/``, and the OpenAPI
description of them."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from openapi_core import OpenAPI
from openapi_core.contrib.django import DjangoOpenAPIRequest, DjangoOpenAPIResponse

from evidence_app.evidence_page import verified_and_claimed
from evidence_app.models import Evidence, SignerClass, TrustRoot, UploadLog
from evidence_app.services.signers import allowlist_publish
from recipes_app.models import Recipe
from tests.evidence_factories import (
    FIRST_PARTY_IDENTITY,
    GITHUB_ISSUER,
    UNKNOWN_IDENTITY,
    EvidenceFactory,
    SignerFactory,
    statement_for,
)
from tests.sigstore_private import PrivateSigstore

Api = Callable[[str | None], Client]


def _upload(client: Client, data: bytes, name: str = "evidence.sigstore.json", **extra: Any) -> Any:
    files = {"bundle": SimpleUploadedFile(name, data, content_type="application/json")}
    files.update(extra)
    return client.post("/api/v1/evidence/", files)


# --- upload ------------------------------------------------------------------------------------


def test_it_uploads_verified_evidence_then_answers_200_for_the_same_bytes(
    api: Api, contributor: str, private_root: TrustRoot, bundle: bytes
) -> None:
    client = api(contributor)

    first = _upload(client, bundle)
    second = _upload(client, bundle)

    assert first.status_code == 201, first.json()
    body = first.json()
    evidence = Evidence.objects.get()
    assert body["id"] == evidence.pk
    assert body["url"] == f"http://testserver/api/v1/evidence/{evidence.pk}/"
    assert body["verdict"] == "verified"
    assert body["failed_step"] == ""
    assert body["signer"]["class"] == "first-party"
    assert body["signer"]["identity"] == FIRST_PARTY_IDENTITY
    assert [s["step"] for s in body["transcript"]] == [
        "parse",
        "signature",
        "statement",
        "bind",
        "classify",
    ]
    assert second.status_code == 200
    assert second.json()["id"] == evidence.pk
    assert evidence.uploaded_by.username == "carol"
    assert UploadLog.objects.filter(user__username="carol").count() == 2


def test_it_answers_422_with_the_failing_step(
    api: Api, contributor: str, private_root: TrustRoot, bundle: bytes
) -> None:
    response = _upload(api(contributor), bundle.replace(b'"payload": "', b'"payload": "AAAA'))

    assert response.status_code == 422
    body = response.json()
    assert body["id"] is None
    assert (body["verdict"], body["failed_step"]) == ("invalid", "signature")
    assert body["reason"] == body["transcript"][-1]["detail"]
    assert not Evidence.objects.exists()


def test_it_checks_an_uploaded_artifact(
    api: Api, contributor: str, private_root: TrustRoot, bundle: bytes, example_recipe: Recipe
) -> None:
    artifact = SimpleUploadedFile("recipe.yaml", b"not the recipe\n")
    response = _upload(api(contributor), bundle, artifact=artifact)

    assert response.status_code == 422
    assert response.json()["failed_step"] == "signature"
    assert "not among the in-toto subjects" in response.json()["reason"]


def test_it_refuses_an_oversized_upload_before_reading_it(
    api: Api, contributor: str, settings: Any, evidence_db: None
) -> None:
    settings.EVIDENCE_MAX_UPLOAD_BYTES = 1000

    huge = _upload(api(contributor), b"{" + b" " * 200_000 + b"}")
    large = _upload(api(contributor), b"{" + b" " * 5_000 + b"}")

    assert huge.status_code == 413
    assert "exceeds the limit of 1,000 bytes" in huge.json()["reason"]
    assert large.status_code == 413
    assert (large.json()["verdict"], large.json()["failed_step"]) == ("rejected", "parse")
    logs = UploadLog.objects.order_by("pk")
    assert [log.outcome for log in logs] == ["too_large", "too_large"]
    assert not Evidence.objects.exists()


def test_it_refuses_other_media_types_and_json_without_an_oci_ref(
    api: Api, contributor: str, evidence_db: None
) -> None:
    client = api(contributor)

    plain = client.post("/api/v1/evidence/", b"{}", content_type="text/plain")
    json_bundle = client.post(
        "/api/v1/evidence/", {"mediaType": "x", "dsseEnvelope": {}}, content_type="application/json"
    )
    nothing = client.post("/api/v1/evidence/", {}, content_type="application/json")

    assert plain.status_code == 415
    assert json_bundle.status_code == 400
    assert "multipart file field `bundle`" in json_bundle.json()["detail"]
    assert nothing.status_code == 400


def test_it_refuses_deeply_nested_json_bodies(
    api: Api, contributor: str, evidence_db: None
) -> None:
    body = b'{"oci_ref": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"

    response = api(contributor).post("/api/v1/evidence/", body, content_type="application/json")

    assert response.status_code == 400
    assert "request body" in response.json()["detail"]


def test_it_needs_a_contributor_or_maintainer_token_to_upload(
    api: Api, make_token: Callable[..., str], bundle: bytes, evidence_db: None
) -> None:
    anonymous = _upload(api(None), bundle)
    bad = _upload(api("aicr_0123456789_notarealtokennotarealtoken"), bundle)
    auditor = _upload(api(make_token("audrey", "auditor")), bundle)

    assert anonymous.status_code == 401
    assert anonymous["WWW-Authenticate"] == 'Bearer realm="api"'
    assert bad.status_code == 401
    assert auditor.status_code == 403
    assert not UploadLog.objects.exists()


# --- list ---------------------------------------------------------------------------------


def test_it_lists_and_filters_evidence(client: Client, example_recipe: Recipe) -> None:
    fresh = EvidenceFactory(recipe=example_recipe, aicr_version="v0.20.0")
    old = EvidenceFactory(
        recipe=example_recipe,
        aicr_version="v0.19.0",
        attested_at=datetime.now(UTC) - timedelta(days=40),
        signer=SignerFactory(signer_class=SignerClass.REPORTED, counted=False),
    )

    everything = client.get("/api/v1/evidence/").json()
    assert everything["count"] == 2
    assert [row["id"] for row in everything["results"]] == [fresh.pk, old.pk]
    row = everything["results"][1]
    assert row["recipe"] == example_recipe.name
    assert row["stale"] is True
    codes = {r["code"] for r in row["stale_reasons"]}
    assert codes == {"older-than-30-days", "aicr-outdated"}
    assert row["counted"] is False
    assert row["signer"]["signer_class"] == "reported"

    def ids(**params: str) -> list[int]:
        return [r["id"] for r in client.get("/api/v1/evidence/", params).json()["results"]]

    assert ids(stale="true") == [old.pk]
    assert ids(stale="false") == [fresh.pk]
    assert ids(**{"class": "reported"}) == [old.pk]
    assert ids(signer=fresh.signer.slug) == [fresh.pk]
    assert ids(aicr_version="v0.20.0") == [fresh.pk]
    assert ids(recipe=example_recipe.name) == [fresh.pk, old.pk]
    assert ids(recipe="nope") == []
    assert ids(verdict="verified") == [fresh.pk, old.pk]
    assert ids(counted="true") == [fresh.pk]
    assert client.get("/api/v1/evidence/", {"class": "nonsense"}).status_code == 400


def test_it_lists_in_a_constant_number_of_queries(client: Client, example_recipe: Recipe) -> None:
    EvidenceFactory.create_batch(2, recipe=example_recipe)
    # Warm the per-process caches (parsed validator catalog) so both measured requests
    # start from the same state, whichever tests ran before this one.
    client.get("/api/v1/evidence/")
    with CaptureQueriesContext(connection) as few:
        assert client.get("/api/v1/evidence/").status_code == 200
    EvidenceFactory.create_batch(20, recipe=example_recipe)
    with CaptureQueriesContext(connection) as many:
        response = client.get("/api/v1/evidence/", {"page_size": 50})
    assert response.json()["count"] == 22
    assert len(many) == len(few)
    with CaptureQueriesContext(connection) as stale:
        client.get("/api/v1/evidence/", {"stale": "true", "page_size": 50})
    assert len(stale) <= len(few) + 2


# --- detail and bytes ------------------------------------------------------------------------


def test_it_shows_one_piece_of_evidence_in_full(
    api: Api, contributor: str, private_root: TrustRoot, bundle: bytes, client: Client
) -> None:
    evidence_id = _upload(api(contributor), bundle).json()["id"]

    body = client.get(f"/api/v1/evidence/{evidence_id}/").json()

    assert body["verdict"] == "verified"
    assert len(body["transcript"]) == 5
    assert body["certificate"]["identity"] == FIRST_PARTY_IDENTITY
    assert body["certificate"]["issuer"] == GITHUB_ISSUER
    assert isinstance(body["rekor_log_index"], int)
    assert body["integrated_time"]
    assert body["trusted_root_name"] == "tests private instance"
    assert body["predicate_summary"]["aicrVersion"] == "v0.19.0-example"
    assert set(body["predicate_summary"]["phases"]) == {"conformance", "deployment", "performance"}
    assert body["check_results"] == {}
    assert body["stale_reasons"] == []
    assert {c["tool"] for c in body["verify_commands"]} == {"cosign", "sigstore-python"}
    assert body["is_demo"] is False
    assert body["is_simulated"] is False
    assert body["withdrawal"] is None
    assert body["bundle_url"] == f"http://testserver/api/v1/evidence/{evidence_id}/bundle"
    assert client.get("/api/v1/evidence/999999/").status_code == 404


def test_it_gives_the_evidence_pages_verified_and_claimed_fields(
    client: Client, example_recipe: Recipe
) -> None:
    """One source for both (``evidence_page.verified_and_claimed``); a missing Rekor entry or
    signed timestamp is never listed as verified."""
    bare = EvidenceFactory(recipe=example_recipe, rekor_log_index=None, integrated_time=None)
    logged = EvidenceFactory(
        recipe=example_recipe,
        rekor_log_index=12345,
        integrated_time=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
    )

    def fields(evidence: Evidence) -> dict[str, list[dict[str, str]]]:
        return client.get(f"/api/v1/evidence/{evidence.pk}/").json()["verified_fields"]

    bare_fields, logged_fields = fields(bare), fields(logged)

    for evidence, got in ((bare, bare_fields), (logged, logged_fields)):
        verified, claimed = verified_and_claimed(evidence)
        assert got == {
            "verified": [item.as_dict() for item in verified],
            "claimed": [item.as_dict() for item in claimed],
        }
    bare_names = {item["field"] for item in bare_fields["verified"]}
    assert {"Rekor log index", "Signed at"}.isdisjoint(bare_names)
    assert "Bundle sha256" in bare_names
    logged_verified = {item["field"]: item["value"] for item in logged_fields["verified"]}
    assert logged_verified["Rekor log index"] == "12345"
    assert logged_verified["Signed at"] == "2026-01-02 03:04:05 UTC"


def test_it_serves_the_exact_bytes(
    api: Api, contributor: str, private_root: TrustRoot, bundle: bytes, client: Client
) -> None:
    evidence = Evidence.objects.get(pk=_upload(api(contributor), bundle).json()["id"])

    response = client.get(f"/api/v1/evidence/{evidence.pk}/bundle")

    assert response.status_code == 200
    assert response.content == bundle
    assert response["Content-Type"] == "application/vnd.dev.sigstore.bundle.v0.3+json"
    assert response["Content-Disposition"] == (
        f'attachment; filename="evidence-{evidence.sha256[:12]}.sigstore.json"'
    )
    assert response["ETag"] == f'"{evidence.sha256}"'
    again = client.get(
        f"/api/v1/evidence/{evidence.pk}/bundle", HTTP_IF_NONE_MATCH=f'"{evidence.sha256}"'
    )
    assert again.status_code == 304


# --- signers ----------------------------------------------------------------------------------


def test_it_lists_signers_and_shows_their_class_history(
    api: Api,
    contributor: str,
    private_root: TrustRoot,
    private_sigstore: PrivateSigstore,
    example_recipe: Recipe,
    client: Client,
) -> None:
    signed = private_sigstore.sign_dsse(
        statement_for(example_recipe), identity=UNKNOWN_IDENTITY, issuer=GITHUB_ISSUER
    )
    slug = _upload(api(contributor), signed.bundle).json()["signer"]["slug"]
    allowlist_publish(
        body=f"schemaVersion: 1.0.0\npartner:\n  - issuer: {GITHUB_ISSUER}\n    source: {slug}\n",
        note="onboard a partner",
    )

    listing = client.get("/api/v1/signers/", {"class": "partner"}).json()
    detail = client.get(f"/api/v1/signers/{slug}/").json()

    assert [s["slug"] for s in listing["results"]] == [slug]
    assert listing["results"][0]["evidence_count"] == 1
    assert (detail["signer_class"], detail["counted"]) == ("partner", True)
    history = detail["class_history"]
    assert [(h["from_class"], h["to_class"]) for h in history] == [
        ("reported", "partner"),
        ("", "reported"),
    ]
    assert "onboard a partner" in history[0]["reason"]
    assert client.get("/api/v1/signers/" + "0" * 32 + "/").status_code == 404


# --- OpenAPI ------------------------------------------------------------------------------------


@pytest.fixture
def schema(client: Client, db: None) -> dict[str, Any]:
    return yaml.safe_load(client.get("/api/schema/").content)


def test_it_describes_the_evidence_api(schema: dict[str, Any]) -> None:
    paths = schema["paths"]
    for path in (
        "/api/v1/evidence/",
        "/api/v1/evidence/{id}/",
        "/api/v1/evidence/{id}/bundle",
        "/api/v1/evidence/{id}/withdraw",
        "/api/v1/uploads/{id}/",
        "/api/v1/signers/",
        "/api/v1/signers/{slug}/",
    ):
        assert path in paths, path
    post = paths["/api/v1/evidence/"]["post"]
    assert {"200", "201", "202", "401", "403", "413", "422"} <= set(post["responses"])
    assert "multipart/form-data" in post["requestBody"]["content"]
    parameters = {p["name"] for p in paths["/api/v1/evidence/"]["get"]["parameters"]}
    assert {"recipe", "signer", "class", "verdict", "stale", "aicr_version", "cursor"} <= parameters
    assert schema["components"]["securitySchemes"]["bearerToken"]["scheme"] == "bearer"


def test_it_describes_what_the_evidence_api_really_returns(
    client: Client, schema: dict[str, Any], example_recipe: Recipe
) -> None:
    evidence = EvidenceFactory(recipe=example_recipe)
    spec = OpenAPI.from_dict({**schema, "servers": [{"url": "http://testserver"}]})
    for path in (
        "/api/v1/evidence/",
        f"/api/v1/evidence/{evidence.pk}/",
        "/api/v1/signers/",
        f"/api/v1/signers/{evidence.signer.slug}/",
    ):
        response = client.get(path)
        assert response.status_code == 200, path
        spec.validate_response(
            DjangoOpenAPIRequest(response.wsgi_request), DjangoOpenAPIResponse(response)
        )
