"""Publishing back: ``export_pointer`` / ``GET /evidence/<id>/pointer.yaml`` write the pointer
AICR's repository expects, at the path it expects, and it passes AICR's own contract."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from evidence_app.corroborate.allowlist import parse_allowlist
from evidence_app.models import Evidence, SignerKind
from evidence_app.pointers import check_pointer, parse_pointer
from recipes_app.models import Recipe
from tests.evidence_factories import EvidenceFactory, SignerFactory

pytestmark = pytest.mark.django_db

DIGEST = "sha256:" + "ab" * 32
OCI = f"ghcr.io/someone/aicr-evidence@{DIGEST}"


@pytest.fixture
def recipe(example_recipe: Recipe) -> Recipe:
    """The example recipe of the bundled catalog, imported for this test (it read whatever
    catalog an earlier test had left, and found none when it ran first)."""
    return example_recipe


def _evidence(recipe: Recipe, **kw: object) -> Evidence:
    kw.setdefault("oci_ref", OCI)
    kw.setdefault("rekor_log_index", 4242)
    return EvidenceFactory(recipe=recipe, **kw)


def test_the_exported_pointer_round_trips_through_the_parser_and_the_contract(
    recipe: Recipe,
) -> None:
    evidence = _evidence(recipe)
    out, err = StringIO(), StringIO()

    call_command("export_pointer", str(evidence.pk), stdout=out, stderr=err)

    path = err.getvalue().strip()
    slug = evidence.signer.slug
    assert path == f"recipes/evidence/{recipe.name}/{slug}/sha256-{'ab' * 32}.yaml"
    pointer = parse_pointer(out.getvalue().encode(), path=path)
    assert (pointer.recipe, pointer.pinned_digest, pointer.predicate_type) == (
        recipe.name,
        DIGEST,
        evidence.predicate_type,
    )
    assert pointer.signer is not None
    assert (pointer.signer.identity, pointer.signer.issuer, pointer.signer.rekor_log_index) == (
        evidence.signer.identity,
        evidence.signer.issuer,
        4242,
    )
    tree_allowlist = parse_allowlist(
        f"schemaVersion: 1.0.0\ncommunity:\n  - issuer: {evidence.signer.issuer}\n"
        f"    source: {slug}\n".encode()
    )
    result = check_pointer(
        pointer, rel_path=path.removeprefix("recipes/evidence/"), allowlist=tree_allowlist
    )
    assert (result.problems, result.claimed_class) == ([], "community")


def test_a_profiled_record_gets_its_profile_and_folder(recipe: Recipe) -> None:
    evidence = _evidence(recipe)
    evidence.predicate = {**evidence.predicate, "profile": {"selection": "gpuStack=eks-managed"}}
    evidence.save()
    out, err = StringIO(), StringIO()
    call_command("export_pointer", str(evidence.pk), stdout=out, stderr=err)
    assert "profile: gpuStack=eks-managed\n" in out.getvalue()
    assert err.getvalue().startswith(f"recipes/evidence/{recipe.name}-gpustack-eks-managed/")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"oci_ref": ""}, "uploaded as bytes, not pulled from an OCI registry"),
        ({"signer": "key"}, "signed with a registered key"),
        ({"verdict": "invalid"}, "only verified evidence"),
    ],
)
def test_it_says_why_no_pointer_can_be_written(
    recipe: Recipe, change: dict[str, str], message: str
) -> None:
    if change.get("signer") == "key":
        change = {"signer": SignerFactory(kind=SignerKind.KEY, issuer="", identity="")}
    evidence = _evidence(recipe, **change)
    with pytest.raises(CommandError, match=message):
        call_command("export_pointer", str(evidence.pk), stdout=StringIO(), stderr=StringIO())


def test_the_evidence_page_offers_the_pointer_of_a_counted_record(
    recipe: Recipe, client: Client
) -> None:
    counted = _evidence(recipe)
    bytes_only = _evidence(recipe, oci_ref="")

    page = client.get(f"/evidence/{counted.pk}/").content.decode()
    assert f'href="/evidence/{counted.pk}/pointer.yaml"' in page
    assert "data-pointer-download" not in client.get(f"/evidence/{bytes_only.pk}/").content.decode()

    response = client.get(f"/evidence/{counted.pk}/pointer.yaml")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/yaml")
    assert response["X-AICR-Pointer-Path"].endswith(f"/sha256-{'ab' * 32}.yaml")
    assert parse_pointer(response.content).pinned_digest == DIGEST
    refused = client.get(f"/evidence/{bytes_only.pk}/pointer.yaml")
    assert refused.status_code == 404
    assert b"not pulled from an OCI registry" in refused.content
