"""Keyless run evidence: sigstore-python signs against loopback Fulcio and Rekor stand-ins."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from django.test import Client

from evidence_app.models import Evidence, SigningKey
from recipes_app.models import Recipe
from tests.consensus_reads import recipe_consensus_states
from tests.sigstore_servers import OIDC_ISSUER, RUNS_IDENTITY, LoopbackSigstore
from tests.validators_app.evidence_support import finished_run
from tests.validators_app.runs_support import RECIPE
from validators_app.services.evidence import PublishError, publish_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def recipe(real_catalog: Any) -> Recipe:
    return Recipe.objects.current().get(name=RECIPE, profile="")


def test_a_run_is_signed_keyless_and_verified(
    sigstore: LoopbackSigstore, trusted: None, recipe: Recipe, client: Client
) -> None:
    evidence = publish_run(finished_run(recipe))

    assert evidence is not None
    assert evidence.verdict == "verified"
    assert evidence.signer.kind == "keyless"
    assert evidence.signer.identity == RUNS_IDENTITY
    assert evidence.signer.issuer == OIDC_ISSUER
    assert evidence.rekor_log_index is not None
    assert evidence.certificate["mode"] == "keyless"
    assert evidence.subject_digest == recipe.digest
    assert sigstore.requests == ["/api/v2/signingCert", "/api/v1/log/entries"]
    assert not SigningKey.objects.exists()  # the site key was not touched
    # Not on the allowlist: verified, shown as reported, not counted.
    assert evidence.signer.signer_class == "reported"
    assert not Evidence.objects.counted().filter(pk=evidence.pk).exists()
    html = client.get(f"/evidence/{evidence.pk}/").content.decode()
    assert RUNS_IDENTITY in html
    assert "Key-signed." not in html


def test_an_allowlisted_run_identity_counts_like_any_signer(
    sigstore: LoopbackSigstore, trusted: None, runs_identity_allowlisted: None, recipe: Recipe
) -> None:
    evidence = publish_run(finished_run(recipe))

    assert evidence is not None
    assert evidence.signer.signer_class == "community"
    assert Evidence.objects.counted().filter(pk=evidence.pk).exists()
    assert RECIPE in recipe_consensus_states(catalog=recipe.catalog)


def test_the_token_can_come_from_a_file(
    sigstore: LoopbackSigstore, trusted: None, recipe: Recipe, settings: Any, tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(sigstore.oidc.token() + "\n")
    settings.SITE_SIGSTORE_IDENTITY_TOKEN = ""
    settings.SITE_SIGSTORE_IDENTITY_TOKEN_FILE = str(token_file)

    evidence = publish_run(finished_run(recipe))

    assert evidence is not None
    assert evidence.signer.identity == RUNS_IDENTITY

    settings.SITE_SIGSTORE_IDENTITY_TOKEN_FILE = str(tmp_path / "missing")
    with pytest.raises(PublishError, match="SITE_SIGSTORE_IDENTITY_TOKEN_FILE cannot be read"):
        publish_run(finished_run(recipe, run_id="20261201-000002-0123456789abcdef"))


def test_a_forged_token_is_refused_by_fulcio_and_nothing_is_published(
    sigstore: LoopbackSigstore, trusted: None, recipe: Recipe, settings: Any
) -> None:
    forged = sigstore.oidc.token(key=ec.generate_private_key(ec.SECP256R1()))
    settings.SITE_SIGSTORE_IDENTITY_TOKEN = forged

    with pytest.raises(PublishError, match="keyless signing failed: FulcioClientError") as info:
        publish_run(finished_run(recipe))

    assert forged not in str(info.value)
    assert sigstore.requests == ["/api/v2/signingCert"]
    assert not Evidence.objects.exists()
    assert not SigningKey.objects.exists()  # no silent fallback to the site key


def test_an_expired_token_is_refused_before_any_request(
    sigstore: LoopbackSigstore, trusted: None, recipe: Recipe, settings: Any
) -> None:
    settings.SITE_SIGSTORE_IDENTITY_TOKEN = sigstore.oidc.token(lifetime=timedelta(minutes=-5))

    with pytest.raises(PublishError, match="keyless signing failed"):
        publish_run(finished_run(recipe))

    assert sigstore.requests == []
    assert not Evidence.objects.exists()


def test_an_untrusted_instance_is_refused_at_the_signature_step(
    sigstore: LoopbackSigstore, recipe: Recipe
) -> None:
    with pytest.raises(PublishError, match="at step signature"):
        publish_run(finished_run(recipe))

    assert not Evidence.objects.exists()
