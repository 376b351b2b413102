"""End to end against a real registry (Debian's ``docker-registry`` on a loopback port, as in
``test_oci.py``): a pointer to a bundle pushed there, signed keyless by the tests' private
Sigstore instance (subject ``recipe:<name>``), is pulled by digest through the OCI upload path,
verified pinned to the signer the pointer claims, and linked; a pointer claiming another signer
for the same bundle is refused and stores nothing."""

from __future__ import annotations

import html
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from aicr_site.celery import app as celery_app
from evidence_app.corroborate.allowlist import source_slug
from evidence_app.models import Evidence, EvidencePointer, TrustRoot
from evidence_app.services import pointers
from recipes_app.models import Recipe
from tests.evidence_app.conftest import BUNDLE_MEDIA_TYPE
from tests.evidence_factories import FIRST_PARTY_IDENTITY, GITHUB_ISSUER, statement_for
from tests.sigstore_private import PrivateSigstore

OTHER_IDENTITY = "https://github.com/someone/fork/.github/workflows/e.yaml@refs/heads/main"


@pytest.fixture
def pull_from(settings: Any, registry: str) -> Iterator[None]:
    settings.EVIDENCE_OCI_ENABLED = True
    settings.EVIDENCE_OCI_ALLOW_LOOPBACK_HTTP = True
    settings.EVIDENCE_OCI_ALLOWED_REGISTRIES = [registry]
    settings.EVIDENCE_OCI_TIMEOUT_SECONDS = 5
    eager = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = eager


def _tree(root: Path, *, recipe: str, ref: str, identity: str) -> Path:
    evidence = root / "recipes" / "evidence"
    slug = source_slug(GITHUB_ISSUER, identity)
    name, _, digest = ref.partition("@")
    folder = evidence / recipe / slug
    folder.mkdir(parents=True)
    (evidence / "allowlist.yaml").write_text(
        f"schemaVersion: 1.0.0\ncommunity:\n  - issuer: {GITHUB_ISSUER}\n    source: {slug}\n"
    )
    (folder / f"sha256-{digest.removeprefix('sha256:')}.yaml").write_text(
        "attestations:\n"
        "  - attestedAt: 2026-11-30T12:00:00Z\n"
        "    bundle:\n"
        f"      digest: {digest}\n"
        f"      oci: {name}:{recipe}\n"
        "      predicateType: https://aicr.run/recipe-evidence/v1\n"
        "    signer:\n"
        f"      identity: {identity}\n"
        f"      issuer: {GITHUB_ISSUER}\n"
        f"recipe: {recipe}\n"
        "schemaVersion: 1.0.0\n"
    )
    return root


@pytest.mark.parametrize("claimed", [FIRST_PARTY_IDENTITY, OTHER_IDENTITY], ids=["same", "other"])
def test_a_pointer_to_a_bundle_in_the_registry_is_pulled_verified_and_linked(
    pull_from: None,
    push: Callable[..., str],
    private_root: TrustRoot,
    private_sigstore: PrivateSigstore,
    example_recipe: Recipe,
    tmp_path: Path,
    django_capture_on_commit_callbacks: Any,
    claimed: str,
    client: Any,
) -> None:
    bundle = private_sigstore.sign_dsse(
        statement_for(example_recipe), identity=FIRST_PARTY_IDENTITY, issuer=GITHUB_ISSUER
    ).bundle
    ref = push(bundle, name="evidence.sigstore.json", media_type=BUNDLE_MEDIA_TYPE)
    tree = _tree(tmp_path, recipe=example_recipe.name, ref=ref, identity=claimed)

    with django_capture_on_commit_callbacks(execute=True):
        pointers.pointer_import(path=tree)
    pointers.pointers_settle()

    row = EvidencePointer.objects.get()
    assert row.upload is not None
    assert row.upload.oci_ref == ref
    if claimed == FIRST_PARTY_IDENTITY:
        evidence = Evidence.objects.get()
        assert row.evidence == evidence
        assert evidence.oci_ref == ref
        assert (row.state, row.reason) == ("ingested", "")
        assert evidence.withdrawn_at is None
        page = html.unescape(client.get(f"/evidence/{evidence.pk}/").content.decode())
        assert f"aicr evidence verify {row.path} --expected-issuer {GITHUB_ISSUER}" in page
    else:
        # Verified pinned to the claimed signer: the bundle's real signer fails the signature
        # step, and nothing contradicting the pointer is stored.
        assert row.state == "refused"
        assert row.reason.startswith("bundle failed verification: ")
        assert row.evidence is None
        assert not Evidence.objects.exists()
    # importing again changes nothing and pulls nothing
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        again = pointers.pointer_import(path=tree)
    assert again.outcomes == {"unchanged": 1}
    assert callbacks == []
    assert Evidence.objects.count() == (1 if claimed == FIRST_PARTY_IDENTITY else 0)


def test_verify_evidence_takes_the_pointer_and_pins_its_signer(
    pull_from: None,
    push: Callable[..., str],
    private_root: TrustRoot,
    private_sigstore: PrivateSigstore,
    example_recipe: Recipe,
    tmp_path: Path,
) -> None:
    """``manage.py verify_evidence <pointer>`` pulls the bundle the pointer pins and verifies it
    pinned to the signer the pointer claims (AICR's ingest rule), storing nothing."""
    from evidence_app.services.verify_result import verify_input

    bundle = private_sigstore.sign_dsse(
        statement_for(example_recipe), identity=FIRST_PARTY_IDENTITY, issuer=GITHUB_ISSUER
    ).bundle
    ref = push(bundle, name="evidence.sigstore.json", media_type=BUNDLE_MEDIA_TYPE)
    results = {}
    for claimed in (FIRST_PARTY_IDENTITY, OTHER_IDENTITY):
        tree = _tree(
            tmp_path / str(len(results)), recipe=example_recipe.name, ref=ref, identity=claimed
        )
        (path,) = (tree / "recipes" / "evidence").rglob("sha256-*.yaml")
        results[claimed] = verify_input(str(path))

    good, other = results[FIRST_PARTY_IDENTITY], results[OTHER_IDENTITY]
    assert (good.input, good.exit) == ("pointer", 0), good.steps
    assert good.bundle_digest == ref.partition("@")[2]
    assert good.pointer is not None
    assert good.pointer["attestations"][0]["signer"]["identity"] == FIRST_PARTY_IDENTITY
    assert good.signer is not None
    assert good.signer["identity"] == FIRST_PARTY_IDENTITY
    assert other.exit == 2
    assert [s["name"] for s in other.steps if s["status"] == "failed"] == ["signature"]
    assert not Evidence.objects.exists()
