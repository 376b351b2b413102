"""Keyless signatures from an issuer the site does not accept (a GitHub Enterprise Server
style ``https://token.actions.githubusercontent.com/<enterprise>``): the signature is good, so
it passes ``signature``; the signer is reported, never counted, and the transcript says why.
Maintainers accept such issuers in the admin (who and when recorded); the verification policy
picks them up and the allowlist then classifies the signer like any other."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client

from evidence_app.corroborate.allowlist import source_slug
from evidence_app.models import AcceptedIssuer, Evidence, Signer, TrustRoot
from evidence_app.services import signers
from evidence_app.services.ingest import policy_current
from evidence_app.verification import verify_signature
from recipes_app.models import Recipe
from tests.evidence_factories import statement_for
from tests.sigstore_private import PrivateSigstore

GHES_ISSUER = "https://token.actions.githubusercontent.com/acme-enterprise"
GHES_IDENTITY = "https://ghe.acme.example/lab/gpu/.github/workflows/evidence.yaml@refs/heads/main"
ADD = "/admin/evidence_app/acceptedissuer/add/"


def _sign(sigstore: PrivateSigstore, recipe: Recipe, hours_ago: int = 1) -> bytes:
    statement = statement_for(recipe, attested_at=datetime.now(UTC) - timedelta(hours=hours_ago))
    return sigstore.sign_dsse(statement, identity=GHES_IDENTITY, issuer=GHES_ISSUER).bundle


def test_a_good_signature_from_an_unlisted_issuer_is_reported_not_refused(
    ingest: Callable[..., Any],
    private_root: TrustRoot,
    private_sigstore: PrivateSigstore,
    example_recipe: Recipe,
) -> None:
    result = ingest(_sign(private_sigstore, example_recipe))

    assert (result.verdict, result.outcome, result.failed_step) == ("verified", "created", "")
    steps = {s["step"]: s for s in result.transcript}
    assert steps["signature"]["ok"] is True
    assert f"via {GHES_ISSUER}" in steps["signature"]["detail"]
    assert "the issuer is not one this site accepts" in steps["signature"]["detail"]
    assert "this site does not accept that issuer" in steps["classify"]["detail"]
    assert "never counted" in steps["classify"]["detail"]
    assert (result.signer["class"], result.signer["counted"]) == ("reported", False)
    assert result.signer["issuer"] == GHES_ISSUER
    assert not Evidence.objects.counted().exists()


def test_an_allowlist_entry_does_not_count_a_signer_of_an_unaccepted_issuer(
    private_sigstore: PrivateSigstore, example_recipe: Recipe, evidence_db: None
) -> None:
    """The decision itself: an unlisted issuer is reported whatever the allowlist says."""
    slug = source_slug(GHES_ISSUER, GHES_IDENTITY)
    allowlist = signers.allowlist_parse(
        f"schemaVersion: 1.0.0\ncommunity:\n  - issuer: {GHES_ISSUER}\n    source: {slug}\n"
    )

    listed = signers.classify_keyless(GHES_ISSUER, GHES_IDENTITY, allowlist)
    unlisted = signers.classify_keyless(GHES_ISSUER, GHES_IDENTITY, allowlist, issuer_listed=False)

    assert (listed.signer_class, listed.counted) == ("community", True)
    assert (unlisted.signer_class, unlisted.counted) == ("reported", False)


def test_the_verifier_refuses_an_unlisted_issuer_unless_asked_to_report_it(
    private_root: TrustRoot, private_sigstore: PrivateSigstore, example_recipe: Recipe
) -> None:
    bundle = _sign(private_sigstore, example_recipe)
    policy = policy_current()
    strict = verify_signature(bundle, trusted_root=policy.trusted_roots, issuer=policy.issuers)
    reporting = verify_signature(
        bundle,
        trusted_root=policy.trusted_roots,
        issuer=policy.issuers,
        report_unlisted_issuers=True,
    )
    tampered = verify_signature(
        bundle.replace(b'"payload": "', b'"payload": "AAAA'),
        trusted_root=policy.trusted_roots,
        issuer=policy.issuers,
        report_unlisted_issuers=True,
    )

    assert strict.status == "invalid"
    assert f"certificate claims issuer {GHES_ISSUER!r}" in strict.detail
    assert reporting.ok
    assert reporting.signer is not None
    assert (reporting.signer.issuer, reporting.signer.issuer_listed) == (GHES_ISSUER, False)
    assert tampered.status == "invalid"  # a bad signature is still a bad signature


def test_a_maintainer_accepts_the_issuer_and_the_allowlist_then_counts_the_signer(
    admin_client: Client,
    ingest: Callable[..., Any],
    private_root: TrustRoot,
    private_sigstore: PrivateSigstore,
    example_recipe: Recipe,
) -> None:
    before = ingest(_sign(private_sigstore, example_recipe, hours_ago=3))
    assert before.signer["class"] == "reported"

    refused = admin_client.post(ADD, {"issuer": "http://idp.example.net", "note": ""})
    added = admin_client.post(ADD, {"issuer": f"  {GHES_ISSUER} ", "note": "Acme's GHES"})
    again = admin_client.post(ADD, {"issuer": GHES_ISSUER, "note": "twice"})

    assert refused.status_code == 200
    assert "is not an https:// URL" in refused.content.decode()
    assert added.status_code == 302
    assert again.status_code == 200  # the form shows the duplicate
    row = AcceptedIssuer.objects.get()
    assert (row.issuer, row.note, row.added_by.username) == (GHES_ISSUER, "Acme's GHES", "admin")
    assert row.added_at is not None
    assert GHES_ISSUER in signers.accepted_issuers()

    accepted = ingest(_sign(private_sigstore, example_recipe, hours_ago=2))
    steps = {s["step"]: s["detail"] for s in accepted.transcript}
    assert "not one this site accepts" not in steps["signature"]
    assert "not on the allowlist" in steps["classify"]  # accepted issuer, unlisted signer
    assert accepted.signer["counted"] is False

    slug = source_slug(GHES_ISSUER, GHES_IDENTITY)
    signers.allowlist_publish(
        body=(
            "schemaVersion: 1.0.0\ncommunity:\n"
            f"  - issuer: {GHES_ISSUER}\n    source: {slug}\n    label: acme-ghes\n"
        ),
        note="acme's enterprise lab",
    )
    counted = ingest(_sign(private_sigstore, example_recipe, hours_ago=1))

    assert (counted.signer["class"], counted.signer["counted"]) == ("community", True)
    signer = Signer.objects.get()
    assert (signer.signer_class, signer.counted) == ("community", True)
    assert Evidence.objects.counted().count() == 3  # the reported ones count now too


@pytest.mark.parametrize(
    "issuer",
    [
        pytest.param("", id="empty"),
        pytest.param("token.actions.githubusercontent.com/acme", id="no-scheme"),
        pytest.param("https://idp.example.net/a b", id="space"),
        pytest.param("https://idp.example.net/\x00", id="nul"),
        pytest.param("javascript:alert(1)", id="script-url"),
    ],
)
def test_an_issuer_must_be_one_https_url(issuer: str) -> None:
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError):
        signers.issuer_check(issuer)
