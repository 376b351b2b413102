"""``/signers/``, ``/signers/<slug>/key.pub`` and the fetch lines before the verify commands."""

from __future__ import annotations

import re
from typing import Any

import pytest

from evidence_app.fetch_steps import attestation_depth, fetch_lines
from evidence_app.models import Evidence, Verdict
from evidence_app.services import keys
from recipes_app.models import Recipe
from tests.evidence_factories import (
    EvidenceFactory,
    SignerFactory,
    example_statement,
    signed_example_tarball,
    tarball,
)
from tests.sigstore_private import generate_key, public_pem, sign_dsse_with_key

pytestmark = pytest.mark.django_db


@pytest.fixture
def key_signed(ingest: Any, example_recipe: Recipe) -> tuple[Evidence, str]:
    key = generate_key("ecdsa-p256")
    pem = public_pem(key)
    keys.signing_key_register(name="lab key", public_key_pem=pem)
    result = ingest(signed_example_tarball(sign_dsse_with_key(example_statement(), key)))
    assert result.verdict == "verified", result.reason
    return result.evidence, pem.decode() if isinstance(pem, bytes) else pem


def row(html: str, slug: str) -> str:
    start = html.index(f'data-signer="{slug}"')
    return html[start : html.index("</tr>", start)]


def test_the_index_lists_each_signer_with_its_records(client, key_signed, example_recipe):
    evidence, _ = key_signed
    keyless = SignerFactory(label="org/keyless-lab")
    EvidenceFactory(recipe=example_recipe, signer=keyless)
    EvidenceFactory(
        recipe=example_recipe,
        signer=keyless,
        withdrawn_at=evidence.uploaded_at,
        withdrawal_reason="bad run",
    )
    reported = SignerFactory(label="someone/else", counted=False)
    EvidenceFactory(recipe=example_recipe, signer=reported)

    response = client.get("/signers/")

    assert response.status_code == 200
    html = response.content.decode()
    key_row = row(html, evidence.signer.slug)
    assert re.search(r"data-counted-records>1<", key_row)
    assert "Registered key" in key_row
    assert f'href="/signers/{evidence.signer.slug}/key.pub"' in key_row
    keyless_row = row(html, keyless.slug)
    assert re.search(r"data-counted-records>1<", keyless_row)  # the withdrawn one is not
    assert ">2</td>" in keyless_row  # … but is among all records
    assert "keyless" in keyless_row
    reported_row = row(html, reported.slug)
    assert re.search(r"data-counted-records>0<", reported_row)
    assert "reported" in reported_row
    # Counted signers first.
    assert html.index(reported.slug) > html.index(keyless.slug)


def test_key_pub_is_the_registered_key_and_nothing_else(client, key_signed):
    evidence, pem = key_signed
    response = client.get(f"/signers/{evidence.signer.slug}/key.pub")

    assert response.status_code == 200
    assert response.content.decode() == pem
    assert response["Content-Disposition"] == 'attachment; filename="key.pub"'
    keyless = SignerFactory()
    assert client.get(f"/signers/{keyless.slug}/key.pub").status_code == 404
    assert client.get("/signers/" + "0" * 32 + "/key.pub").status_code == 404
    assert client.get("/signers/%27%3Bdrop/key.pub").status_code == 404


def test_the_evidence_page_fetches_what_the_verify_commands_read(client, key_signed):
    evidence, _ = key_signed
    html = client.get(f"/evidence/{evidence.pk}/").content.decode()

    fetch = re.search(r'<code id="fetch-command">(.*?)</code>', html, re.S)
    assert fetch is not None
    lines = fetch.group(1).splitlines()
    assert lines == [
        f"curl -fsSL -o evidence.tar http://testserver/api/v1/evidence/{evidence.pk}/bundle",
        "mkdir -p summary-bundle",
        "tar -xf evidence.tar -C summary-bundle --strip-components=1",
        f"curl -fsSL -o key.pub http://testserver/signers/{evidence.signer.slug}/key.pub",
    ]
    assert "--key key.pub" in html
    assert "summary-bundle/attestation.intoto.jsonl" in html


def test_a_bundle_fetches_its_recipe_pinned_to_the_catalog(example_recipe):
    evidence = EvidenceFactory(recipe=example_recipe)
    lines = fetch_lines(evidence, base_url="https://dash.example")
    assert lines == [
        f"curl -fsSL -o evidence.sigstore.json https://dash.example/api/v1/evidence/{evidence.pk}/bundle",
        "curl -fsSL -o recipe.yaml 'https://dash.example/api/v1/recipes/"
        f"{example_recipe.name}/resolved.yaml?catalog={example_recipe.catalog_id}'",
    ]


def test_the_attestation_depth_follows_the_archive_layout():
    assert attestation_depth(tarball({"attestation.intoto.jsonl": b"{}"})) == 0
    assert attestation_depth(tarball({"a/b/attestation.intoto.jsonl": b"{}"})) == 2
    assert attestation_depth(tarball({"a/other.json": b"{}"})) is None
    assert attestation_depth(b"not a tarball") is None


def test_an_unverified_record_offers_no_fetch_lines(client, example_recipe):
    evidence = EvidenceFactory(recipe=example_recipe, verdict=Verdict.INVALID)
    html = client.get(f"/evidence/{evidence.pk}/").content.decode()
    assert 'id="fetch-command"' not in html
