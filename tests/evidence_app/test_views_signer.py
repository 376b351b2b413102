"""A signer's page: who it is, whether it counts and why, its class history, its evidence."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from evidence_app.models import SignerClass, SignerClassChange, SignerKind, SigningKey
from evidence_app.services.signers import key_source_id
from tests.evidence_factories import GITHUB_ISSUER, EvidenceFactory, SignerFactory
from tests.factories import CatalogFactory, RecipeFactory

pytestmark = pytest.mark.django_db

HOSTILE = '<script>alert("x")</script>\'"; rm -rf ~ $(id) `id` &amp;'


def signer_url(signer: Any) -> str:
    return reverse("evidence:signer", args=[signer.slug])


def test_it_shows_a_counted_keyless_signer_and_its_history(client: Client) -> None:
    signer = SignerFactory(label="acme/gpu-lab", signer_class=SignerClass.COMMUNITY)
    SignerClassChange.objects.create(
        signer=signer,
        from_class="",
        to_class=SignerClass.REPORTED,
        from_counted=None,
        to_counted=False,
        reason="first seen: not on the allowlist",
    )
    SignerClassChange.objects.create(
        signer=signer,
        from_class=SignerClass.REPORTED,
        to_class=SignerClass.COMMUNITY,
        from_counted=False,
        to_counted=True,
        reason="allowlist #2 lists its source slug",
    )

    page = client.get(signer_url(signer)).content.decode()

    assert '<h1 class="recipe-title">acme/gpu-lab</h1>' in page
    assert 'class="badge badge--counted">counted</span>' in page
    assert signer.identity in page
    assert GITHUB_ISSUER in page
    assert signer.slug in page
    assert "Counted: the certificate&#x27;s issuer and identity match the allowlist" in page
    history = re.findall(r"<td class=\"wrap\">([^<]+)", page)
    assert history[:2] == ["allowlist #2 lists its source slug", "first seen: not on the allowlist"]
    assert "reported → <strong>community</strong>" in page


def test_it_explains_why_a_reported_signer_does_not_count(client: Client) -> None:
    signer = SignerFactory(counted=False, signer_class=SignerClass.REPORTED)

    page = client.get(signer_url(signer)).content.decode()

    assert 'class="badge badge--reported">reported</span>' in page
    assert "Reported, not counted: the signature verified, but this issuer and identity" in page


def test_it_shows_a_key_signers_fingerprint(client: Client) -> None:
    key = SigningKey.objects.create(
        name="lab key", public_key_pem="-----", fingerprint="ab" * 32, algorithm="ecdsa-p256"
    )
    signer = SignerFactory(
        kind=SignerKind.KEY,
        issuer="",
        identity="",
        key=key,
        source_id=key_source_id(key.fingerprint),
        slug=key_source_id(key.fingerprint)[:32],
        signer_class=SignerClass.REGISTERED_KEY,
        label="lab key",
    )

    page = client.get(signer_url(signer)).content.decode()

    assert "ab" * 32 in page
    assert "Counted: signed with a public key a maintainer registered." in page


def test_it_lists_the_signers_evidence_over_time_in_pages(client: Client) -> None:
    signer = SignerFactory()
    catalog = CatalogFactory()
    recipes = RecipeFactory.create_batch(3, catalog=catalog)
    for i in range(30):
        EvidenceFactory(
            recipe=recipes[i % 3],
            signer=signer,
            attested_at=timezone.now() - timedelta(days=i),
            is_demo=i == 0,
            withdrawn_at=timezone.now() if i == 1 else None,
            withdrawal_reason="oops" if i == 1 else "",
        )

    page = client.get(signer_url(signer)).content.decode()
    partial = client.get(
        signer_url(signer),
        {"page": 2},
        headers={"HX-Request": "true", "HX-Target": "signer-evidence"},
    )

    assert 'Evidence over time <span class="count">30</span>' in page
    assert "for 3 recipes" in page
    assert len(re.findall(r'<tr class="evidence-row', page)) == 25
    assert ">DEMO</span>" in page
    assert 'class="evidence-row is-withdrawn"' in page
    assert "stale: older-than-30-days" not in page  # the first page is the newest 25
    body = partial.content.decode()
    assert body.lstrip().startswith('<section id="signer-evidence"')
    assert len(re.findall(r'<tr class="evidence-row', body)) == 5
    assert partial["HX-Push-Url"] == signer_url(signer) + "?page=2"


def test_it_escapes_hostile_signer_strings(client: Client) -> None:
    signer = SignerFactory(label=HOSTILE[:200], identity=HOSTILE + "C" * 3900, issuer=HOSTILE)
    SignerClassChange.objects.create(
        signer=signer, to_class="reported", to_counted=False, reason=HOSTILE
    )

    page = client.get(signer_url(signer)).content.decode()

    assert "<script>alert" not in page
    assert page.count("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;") >= 4
