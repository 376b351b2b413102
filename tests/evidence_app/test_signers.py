"""Signers, the allowlist and registered keys: publishing a new allowlist version re-classifies
every signer with history; keys are validated and can be revoked; the admin goes through the
same services."""

from __future__ import annotations

from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from django.core.exceptions import ValidationError
from django.test import Client

from evidence_app.corroborate.allowlist import source_slug
from evidence_app.models import (
    Allowlist,
    Evidence,
    Signer,
    SignerClass,
    SignerClassChange,
    SigningKey,
    TrustRoot,
)
from evidence_app.services import keys, signers
from evidence_app.services.staleness import staleness_bulk
from recipes_app.models import Recipe
from tests.evidence_app.conftest import EMPTY_ALLOWLIST
from tests.evidence_factories import (
    COMMUNITY_IDENTITY,
    GITHUB_ISSUER,
    UNKNOWN_IDENTITY,
    EvidenceFactory,
    example_statement,
    statement_for,
)
from tests.sigstore_private import PrivateSigstore, generate_key, public_pem, sign_dsse_with_key

COMMUNITY_SLUG = source_slug(GITHUB_ISSUER, COMMUNITY_IDENTITY)
WITH_COMMUNITY = (
    "schemaVersion: 1.0.0\ncommunity:\n"
    f"  - issuer: {GITHUB_ISSUER}\n    source: {COMMUNITY_SLUG}\n    label: acme-lab\n"
)


@pytest.fixture
def two_keyless_and_one_key_signer(
    ingest: Any, private_root: TrustRoot, private_sigstore: PrivateSigstore, example_recipe: Recipe
) -> dict[str, Signer]:
    for identity in (COMMUNITY_IDENTITY, UNKNOWN_IDENTITY):
        signed = private_sigstore.sign_dsse(
            statement_for(example_recipe), identity=identity, issuer=GITHUB_ISSUER
        )
        assert ingest(signed.bundle).verdict == "verified"
    key = generate_key("ed25519")
    keys.signing_key_register(name="lab key", public_key_pem=public_pem(key))
    assert ingest(sign_dsse_with_key(example_statement(), key)).verdict == "verified"
    return {
        "community": Signer.objects.get(slug=COMMUNITY_SLUG),
        "unknown": Signer.objects.get(slug=source_slug(GITHUB_ISSUER, UNKNOWN_IDENTITY)),
        "key": Signer.objects.get(kind="key"),
    }


def test_it_reclassifies_every_signer_when_the_allowlist_changes(
    two_keyless_and_one_key_signer: dict[str, Signer],
) -> None:
    s = two_keyless_and_one_key_signer
    assert s["community"].signer_class == SignerClass.REPORTED
    before = SignerClassChange.objects.count()

    onboard = signers.allowlist_publish(body=WITH_COMMUNITY, note="onboard acme")

    community = Signer.objects.get(pk=s["community"].pk)
    assert (community.signer_class, community.counted, community.label) == (
        "community",
        True,
        "acme-lab",
    )
    assert Signer.objects.get(pk=s["unknown"].pk).signer_class == SignerClass.REPORTED
    assert Signer.objects.get(pk=s["key"].pk).signer_class == SignerClass.REGISTERED_KEY
    change = SignerClassChange.objects.exclude(reason__startswith="first seen").get()
    assert SignerClassChange.objects.count() == before + 1
    assert (change.signer, change.from_class, change.to_class) == (
        community,
        "reported",
        "community",
    )
    assert (change.from_counted, change.to_counted, change.allowlist) == (False, True, onboard)
    assert f"allowlist #{onboard.pk} published" in change.reason
    assert "onboard acme" in change.reason
    evidence = Evidence.objects.get(signer=community)
    assert Evidence.objects.counted().filter(pk=evidence.pk).exists()
    assert staleness_bulk([evidence])[evidence.pk] == []

    removal = signers.allowlist_publish(body=EMPTY_ALLOWLIST, note="acme left")

    community.refresh_from_db()
    assert (community.signer_class, community.counted) == ("reported", False)
    latest = community.class_changes.first()
    assert (latest.from_class, latest.to_class, latest.allowlist) == (
        "community",
        "reported",
        removal,
    )
    assert not Evidence.objects.counted().filter(pk=evidence.pk).exists()
    codes = [r.code for r in staleness_bulk([evidence])[evidence.pk]]
    assert codes == ["signer-not-allowlisted"]


def test_it_refuses_an_invalid_allowlist_with_the_parsers_message(evidence_db: None) -> None:
    count = Allowlist.objects.count()
    for body, message in (
        ("schemaVersion: [unclosed", "not valid YAML"),
        ("schemaVersion: 2.0.0\n", "unsupported allowlist schemaVersion"),
        (
            f"schemaVersion: 1.0.0\ncommunity:\n  - issuer: {GITHUB_ISSUER}\n"
            f"    identity: {COMMUNITY_IDENTITY}\n",
            "field identity not found",
        ),
        (
            "schemaVersion: 1.0.0\nfirstParty:\n  - issuer: x\n    identityPattern: '^.*$'\n",
            "identityPattern",
        ),
    ):
        with pytest.raises(ValidationError, match=message):
            signers.allowlist_publish(body=body)
    assert Allowlist.objects.count() == count


def test_it_classifies_new_signers_against_the_allowlist_in_force(
    ingest: Any, private_root: TrustRoot, private_sigstore: PrivateSigstore, example_recipe: Recipe
) -> None:
    signers.allowlist_publish(body=WITH_COMMUNITY)
    signed = private_sigstore.sign_dsse(
        statement_for(example_recipe), identity=COMMUNITY_IDENTITY, issuer=GITHUB_ISSUER
    )

    result = ingest(signed.bundle)

    assert result.signer["class"] == "community"
    first = SignerClassChange.objects.get(signer__slug=COMMUNITY_SLUG)
    assert first.allowlist == Allowlist.objects.in_force()


# --- keys ---------------------------------------------------------------------------------


def _pem(key: Any) -> str:
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def test_it_accepts_only_p256_and_ed25519_public_keys(db: None) -> None:
    ed = keys.signing_key_register(name="ed", public_key_pem=public_pem(generate_key("ed25519")))
    p256 = keys.signing_key_register(
        name="p256", public_key_pem=_pem(ec.generate_private_key(ec.SECP256R1()))
    )

    assert (ed.algorithm, len(ed.fingerprint)) == ("ed25519", 64)
    assert p256.algorithm == "ecdsa-p256"
    for bad, message in (
        (_pem(ec.generate_private_key(ec.SECP384R1())), "Only ECDSA P-256 and Ed25519"),
        (_pem(rsa.generate_private_key(public_exponent=65537, key_size=2048)), "Only ECDSA"),
        ("-----BEGIN PRIVATE KEY-----\nxx\n-----END PRIVATE KEY-----\n", "private key"),
        ("not a key", "Not a PEM public key"),
        (p256.public_key_pem, "already registered"),
    ):
        with pytest.raises(ValidationError, match=message):
            keys.signing_key_register(name="bad", public_key_pem=bad)


def test_a_revoked_key_stops_counting_and_verifying(ingest: Any, example_recipe: Recipe) -> None:
    key = generate_key("ecdsa-p256")
    registered = keys.signing_key_register(name="lab key", public_key_pem=public_pem(key))
    first = ingest(sign_dsse_with_key(example_statement(), key))
    assert first.verdict == "verified"

    keys.signing_key_revoke(key=registered)

    signer = Signer.objects.get()
    assert (signer.signer_class, signer.counted) == ("reported", False)
    assert "revoked" in signer.class_changes.first().reason
    assert not Evidence.objects.counted().exists()
    statement = statement_for(example_recipe, aicr_version="v0.20.0")
    again = ingest(sign_dsse_with_key(statement, key))
    assert (again.verdict, again.failed_step) == ("invalid", "signature")
    assert again.reason.startswith("no registered key matched")


# --- admin ---------------------------------------------------------------------------------


def test_the_admin_publishes_validated_allowlist_versions(
    admin_client: Client, two_keyless_and_one_key_signer: dict[str, Signer]
) -> None:
    count = Allowlist.objects.count()
    form = admin_client.get("/admin/evidence_app/allowlist/add/")
    assert form.status_code == 200
    assert "schemaVersion" in form.content.decode()  # pre-filled with the version in force

    bad = admin_client.post(
        "/admin/evidence_app/allowlist/add/", {"body": "schemaVersion: [", "note": "x"}
    )
    assert bad.status_code == 200
    assert "not valid YAML" in bad.content.decode()
    assert Allowlist.objects.count() == count

    good = admin_client.post(
        "/admin/evidence_app/allowlist/add/", {"body": WITH_COMMUNITY, "note": "via admin"}
    )
    assert good.status_code == 302
    assert Allowlist.objects.count() == count + 1
    newest = Allowlist.objects.in_force()
    assert (newest.note, newest.created_by.username) == ("via admin", "admin")
    assert Signer.objects.get(slug=COMMUNITY_SLUG).signer_class == "community"
    # versions are add-only
    change = admin_client.post(
        f"/admin/evidence_app/allowlist/{newest.pk}/change/", {"body": EMPTY_ALLOWLIST}
    )
    assert change.status_code == 403
    signer_page = admin_client.get(
        f"/admin/evidence_app/signer/{Signer.objects.get(slug=COMMUNITY_SLUG).pk}/change/"
    )
    assert "via admin" in signer_page.content.decode()


def test_the_admin_validates_trusted_roots_and_keys(
    admin_client: Client, private_sigstore: PrivateSigstore, evidence_db: None
) -> None:
    bad_root = admin_client.post(
        "/admin/evidence_app/trustroot/add/",
        {"name": "broken", "trusted_root_json": '{"mediaType": "nope"}', "enabled": "on"},
    )
    assert bad_root.status_code == 200
    assert "mediaType must be" in bad_root.content.decode()
    good_root = admin_client.post(
        "/admin/evidence_app/trustroot/add/",
        {
            "name": "our instance",
            "trusted_root_json": private_sigstore.trusted_root_json(),
            "accepted_issuers": "https://idp.example.net\n",
            "enabled": "on",
        },
    )
    assert good_root.status_code == 302
    root = TrustRoot.objects.get(name="our instance")
    assert (root.is_production, len(root.sha256), root.issuer_list) == (
        False,
        64,
        ["https://idp.example.net"],
    )
    assert root.added_by.username == "admin"
    assert "https://idp.example.net" in signers.accepted_issuers()

    rsa_pem = _pem(rsa.generate_private_key(public_exponent=65537, key_size=2048))
    bad_key = admin_client.post(
        "/admin/evidence_app/signingkey/add/", {"name": "rsa", "public_key_pem": rsa_pem}
    )
    assert "Only ECDSA P-256 and Ed25519" in bad_key.content.decode()
    good_key = admin_client.post(
        "/admin/evidence_app/signingkey/add/",
        {"name": "lab", "public_key_pem": public_pem(generate_key("ecdsa-p256")).decode()},
    )
    assert good_key.status_code == 302
    key = SigningKey.objects.get()
    assert (key.algorithm, len(key.fingerprint), key.registered_by.username) == (
        "ecdsa-p256",
        64,
        "admin",
    )


def test_the_admin_withdraws_evidence_only_with_a_reason(
    admin_client: Client, example_recipe: Recipe
) -> None:
    evidence = EvidenceFactory(recipe=example_recipe)
    url = "/admin/evidence_app/evidence/"
    action = {"action": "withdraw", "_selected_action": [evidence.pk], "index": 0}

    admin_client.post(url, {**action, "reason": ""})
    evidence.refresh_from_db()
    assert evidence.withdrawn_at is None

    response = admin_client.post(url, {**action, "reason": "lab mix-up"}, follow=True)
    evidence.refresh_from_db()
    assert evidence.withdrawal_reason == "lab mix-up"
    assert "Withdrew 1" in response.content.decode()
    assert admin_client.get(f"{url}{evidence.pk}/change/").status_code == 200
