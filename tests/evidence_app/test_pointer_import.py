"""Importing AICR's pointer trees (``services.pointers``): rows, reasons, no network, idempotence,
retries with backoff, and the signer check after ingest."""

from __future__ import annotations

import shutil
import socket
from datetime import timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone

from evidence_app.corroborate.allowlist import load_allowlist
from evidence_app.models import (
    Evidence,
    EvidencePointer,
    PointerState,
    SignerKind,
    UploadLog,
    UploadOutcome,
    UploadState,
    Verdict,
)
from evidence_app.pointers import parse_pointer
from evidence_app.services import pointers
from recipes_app.models import Recipe
from tests.evidence_app.test_pointer_contract import V019, V1, pointers_of
from tests.evidence_factories import EvidenceFactory, SignerFactory

pytestmark = pytest.mark.django_db

NOT_ALLOWED = "registry ghcr.io not allowed on this site"
NOT_ON_V1_ALLOWLIST = {
    "728b071aed7124418b1fa9c7f0521e24",  # gb300 (v1 and the first v3 pointer)
    "3be4483c0c6e439444ba6763efe9a586",  # h100-gke-cos-…-gcp-managed
}


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"a connection was attempted: {args[:1]}")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)


def _expected(tree: Path, rel: str) -> dict[str, Any]:
    pointer = parse_pointer((tree / rel).read_bytes())
    assert pointer.signer is not None
    return {
        "recipe": pointer.recipe,
        "profile": pointer.profile,
        "signer_identity": pointer.signer.identity,
        "signer_issuer": pointer.signer.issuer,
        "predicate_type": pointer.predicate_type,
        "bundle_digest": pointer.pinned_digest,
    }


def _row(rel: str) -> EvidencePointer:
    return EvidencePointer.objects.get(path="recipes/evidence/" + rel)


@pytest.mark.parametrize("oci_enabled", [False, True], ids=["oci-off", "oci-on-unlisted"])
def test_every_real_v019_pointer_becomes_pending_and_nothing_is_contacted(
    evidence_db: None, no_network: None, settings: Any, oci_enabled: bool
) -> None:
    settings.EVIDENCE_OCI_ENABLED = oci_enabled
    settings.EVIDENCE_OCI_ALLOWED_REGISTRIES = [] if not oci_enabled else ["127.0.0.1:5000"]

    report = pointers.pointer_import(path=V019.parent.parent)

    rels = pointers_of(V019)
    assert report.outcomes == {"created": len(rels)}
    assert EvidencePointer.objects.count() == len(rels)
    for rel in rels:
        row = _row(rel)
        fields = {k: getattr(row, k) for k in _expected(V019, rel)}
        assert fields == _expected(V019, rel)
        assert (row.state, row.reason, row.claimed_class) == ("pending", NOT_ALLOWED, "community")
        assert row.source == rel.split("/")[1]
        assert row.last_tried is not None
        assert row.next_try is not None
        assert row.next_try > row.last_tried
    assert not UploadLog.objects.exists()
    assert not Evidence.objects.exists()


def test_the_v1_tree_pends_what_its_allowlist_lists_and_refuses_the_rest(
    evidence_db: None, no_network: None
) -> None:
    pointers.pointer_import(path=V1)

    listed = {e.source for e in load_allowlist(V1 / "allowlist.yaml").entries if e.source}
    for rel in pointers_of(V1):
        row = _row(rel)
        if rel.count("/") == 0:
            assert row.state == "pending"
            assert row.reason.startswith("flat pointer: recipes/evidence/<recipe>.yaml is an")
            assert row.next_try is None
            continue
        source = rel.split("/")[1]
        assert {k: getattr(row, k) for k in _expected(V1, rel)} == _expected(V1, rel)
        if source in listed:
            assert (row.state, row.reason, row.claimed_class) == (
                "pending",
                NOT_ALLOWED,
                "community",
            )
        else:
            assert source in NOT_ON_V1_ALLOWLIST
            assert row.state == "refused"
            assert row.reason.endswith(
                "is not allowlisted as community or partner in the tree's allowlist.yaml"
            )
    v3 = EvidencePointer.objects.get(predicate_type="https://aicr.run/recipe-evidence/v3")
    assert v3.recipe == "gb300-generic-ubuntu-training"
    profiled = EvidencePointer.objects.filter(profile="gpuStack=bundle-installer")
    assert profiled.count() == 5


def test_importing_the_same_tree_twice_creates_nothing_new(
    evidence_db: None, no_network: None, tmp_path: Path
) -> None:
    first = pointers.pointer_import(path=V019)
    before = list(EvidencePointer.objects.order_by("pk").values())

    second = pointers.pointer_import(path=V019)

    assert second.outcomes == {"unchanged": sum(first.outcomes.values())}
    assert list(EvidencePointer.objects.order_by("pk").values()) == before
    assert not Evidence.objects.exists()


def test_a_changed_tree_allowlist_rechecks_the_pointers(
    evidence_db: None, no_network: None, tmp_path: Path
) -> None:
    tree = tmp_path / "aicr" / "recipes" / "evidence"
    shutil.copytree(V019, tree)
    (tree / "allowlist.yaml").write_text(
        "schemaVersion: 1.0.0\nfirstParty: []\ncommunity: []\npartner: []\n"
    )
    pointers.pointer_import(path=tmp_path / "aicr")
    assert set(EvidencePointer.objects.values_list("state", flat=True)) == {"refused"}

    shutil.copy(V019 / "allowlist.yaml", tree / "allowlist.yaml")
    report = pointers.pointer_import(path=tmp_path / "aicr" / "recipes")

    assert report.outcomes == {"updated": EvidencePointer.objects.count()}
    assert set(EvidencePointer.objects.values_list("reason", flat=True)) == {NOT_ALLOWED}


def test_a_malformed_pointer_is_recorded_refused_with_its_reason(
    evidence_db: None, tmp_path: Path
) -> None:
    tree = tmp_path / "recipes" / "evidence"
    (tree / "h100-x" / ("a" * 32)).mkdir(parents=True)
    (tree / "h100-x" / ("a" * 32) / "sha256-00.yaml").write_text("schemaVersion: [\n")

    pointers.pointer_import(path=tree)

    row = EvidencePointer.objects.get()
    assert (row.state, row.recipe) == ("refused", "h100-x")
    assert "malformed YAML" in row.reason
    assert row.path.startswith("recipes/evidence/h100-x/")


def test_it_reads_the_commit_of_a_checkout_without_running_git(
    evidence_db: None, no_network: None, tmp_path: Path
) -> None:
    shutil.copytree(V019, tmp_path / "recipes" / "evidence")
    (tmp_path / ".git" / "refs" / "heads").mkdir(parents=True)
    (tmp_path / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (tmp_path / ".git" / "refs" / "heads" / "main").write_text("8703d8cf" + "0" * 32 + "\n")

    report = pointers.pointer_import(path=tmp_path)

    assert report.tree.commit == "8703d8cf" + "0" * 32
    assert set(EvidencePointer.objects.values_list("tree_commit", flat=True)) == {
        "8703d8cf" + "0" * 32
    }


# --- retries --------------------------------------------------------------------------------------


def test_the_retry_backs_off_exponentially_up_to_the_cap(
    evidence_db: None, no_network: None, settings: Any
) -> None:
    settings.EVIDENCE_POINTER_RETRY_BASE_SECONDS = 60
    settings.EVIDENCE_POINTER_RETRY_MAX_SECONDS = 300
    pointers.pointer_import(path=V019)
    row = EvidencePointer.objects.order_by("pk").first()
    assert row is not None
    delays = []
    now = timezone.now()
    for _ in range(5):
        assert row.next_try is not None
        now = row.next_try
        assert pointers.pointers_retry(now=now) == EvidencePointer.objects.count()
        row.refresh_from_db()
        assert row.next_try is not None
        delays.append((row.next_try - now).total_seconds())
    assert delays == [120, 240, 300, 300, 300]
    assert row.tries == 6
    assert row.reason == NOT_ALLOWED
    # not due yet: nothing is tried
    assert pointers.pointers_retry(now=now + timedelta(seconds=1)) == 0


def test_the_retry_rechecks_the_registry_policy_and_enqueues_the_pinned_pull(
    evidence_db: None, no_network: None, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    pointers.pointer_import(path=V019)
    requested: list[str] = []

    def fake_request(*, oci_ref: str, user: Any) -> UploadLog:
        requested.append(oci_ref)
        return UploadLog.objects.create(channel="oci", oci_ref=oci_ref, state=UploadState.PENDING)

    monkeypatch.setattr(pointers.oci, "oci_upload_request", fake_request)
    settings.EVIDENCE_OCI_ENABLED = True
    settings.EVIDENCE_OCI_ALLOWED_REGISTRIES = ["ghcr.io"]

    later = timezone.now() + timedelta(days=2)
    assert pointers.pointers_retry(now=later) == EvidencePointer.objects.count()

    row = _row(pointers_of(V019)[0])
    assert row.upload is not None
    assert row.reason.startswith(f"pull queued (upload #{row.upload.pk})")
    assert row.state == "pending"
    assert f"{row.oci}@{row.bundle_digest}" in requested
    # an in-flight pull is not requested twice
    assert pointers.pointers_retry(now=later + timedelta(days=2)) == EvidencePointer.objects.count()
    assert len(requested) == EvidencePointer.objects.count()


def test_the_beat_schedule_runs_the_retry_task(settings: Any) -> None:
    entry = settings.CELERY_BEAT_SCHEDULE["evidence-pointers-retry"]
    assert entry["task"] == "evidence_app.tasks.pointers_retry"
    from evidence_app import tasks

    assert tasks.pointers_retry.name == entry["task"]


# --- the signer check after ingest ----------------------------------------------------------------


def _pulled(row: EvidencePointer, evidence: Evidence | None, verdict: str) -> None:
    log = UploadLog.objects.create(
        channel="oci",
        oci_ref=f"{row.oci}@{row.bundle_digest}",
        state=UploadState.DONE,
        verdict=verdict,
        reason="" if evidence else "signature: no valid signature",
        evidence=evidence,
        created=evidence is not None,
        outcome=UploadOutcome.CREATED if evidence else UploadOutcome.REFUSED,
    )
    EvidencePointer.objects.filter(pk=row.pk).update(upload=log)


@pytest.fixture
def imported(evidence_db: None, no_network: None) -> EvidencePointer:
    pointers.pointer_import(path=V019)
    # A pointer of a leaf recipe of the catalog (evidence binds to a resolvable recipe).
    return EvidencePointer.objects.filter(recipe__in=Recipe.objects.values("name")).order_by(
        "path"
    )[0]


def _evidence_for(row: EvidencePointer, **signer: Any) -> Evidence:
    recipe = Recipe.objects.filter(name=row.recipe).order_by("-pk").first()
    assert recipe is not None
    return EvidenceFactory(recipe=recipe, signer=SignerFactory(**signer))


def test_a_pull_signed_by_the_claimed_signer_ingests_and_links(
    imported: EvidencePointer,
) -> None:
    evidence = _evidence_for(
        imported, identity=imported.signer_identity, issuer=imported.signer_issuer
    )
    _pulled(imported, evidence, Verdict.VERIFIED)

    assert pointers.pointers_settle() == 1

    imported.refresh_from_db()
    assert (imported.state, imported.evidence, imported.reason) == ("ingested", evidence, "")
    assert imported.next_try is None


def test_a_pull_signed_by_someone_else_is_refused_and_withdrawn(
    imported: EvidencePointer,
) -> None:
    evidence = _evidence_for(imported)  # another identity
    _pulled(imported, evidence, Verdict.VERIFIED)

    pointers.pointers_settle()

    imported.refresh_from_db()
    evidence.refresh_from_db()
    assert imported.state == "refused"
    assert imported.reason.startswith("refused: signer differs: the bundle is signed by ")
    assert evidence.withdrawn_at is not None
    assert imported.path in evidence.withdrawal_reason
    assert not Evidence.objects.counted().filter(pk=evidence.pk).exists()


def test_a_bundle_that_fails_verification_refuses_the_pointer(
    imported: EvidencePointer,
) -> None:
    _pulled(imported, None, Verdict.INVALID)

    pointers.pointers_settle()

    imported.refresh_from_db()
    assert imported.state == "refused"
    assert imported.reason == "bundle failed verification: signature: no valid signature"


def test_an_unreachable_registry_leaves_the_pointer_pending_for_a_retry(
    imported: EvidencePointer,
) -> None:
    _pulled(imported, None, Verdict.REJECTED)

    pointers.pointers_settle()

    imported.refresh_from_db()
    assert imported.state == PointerState.PENDING
    assert imported.upload is None
    assert imported.reason.startswith("pull failed, retried later: ")


# --- the command ---------------------------------------------------------------------------------


def test_the_command_prints_each_pointer_and_the_summary(
    evidence_db: None, no_network: None
) -> None:
    out = StringIO()
    call_command("import_evidence", str(V1), "--allowlist=skip", stdout=out)

    text = out.getvalue()
    assert f"pending  recipes/evidence/{pointers_of(V1)[0]}: {NOT_ALLOWED}" in text
    assert "pointers: 10 created; now 7 pending, 3 refused" in text.replace("\n", " ")


def test_keyless_signers_only_are_compared(imported: EvidencePointer) -> None:
    evidence = _evidence_for(imported, kind=SignerKind.KEY, issuer="", identity="")
    _pulled(imported, evidence, Verdict.VERIFIED)

    pointers.pointers_settle()

    imported.refresh_from_db()
    assert imported.state == "refused"
    assert "registered key" in imported.reason


def _tree_archive(root: Path) -> bytes:
    """``tar czf`` of an AICR checkout's ``recipes/evidence/``."""
    import io
    import tarfile

    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        tar.add(root, arcname="recipes/evidence")
    return out.getvalue()


def test_a_maintainer_imports_an_uploaded_tree_in_the_admin(
    evidence_db: None, no_network: None, admin_client: Any, client: Any, django_user_model: Any
) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    listing = admin_client.get("/admin/evidence_app/evidencepointer/").content.decode()
    assert 'href="/admin/evidence_app/evidencepointer/import/"' in listing
    archive = SimpleUploadedFile("evidence.tgz", _tree_archive(V019))

    done = admin_client.post("/admin/evidence_app/evidencepointer/import/", {"archive": archive})

    assert done.status_code == 302
    rels = pointers_of(V019)
    assert EvidencePointer.objects.count() == len(rels)
    assert {row.state for row in EvidencePointer.objects.all()} == {"pending"}
    again = admin_client.post(
        "/admin/evidence_app/evidencepointer/import/",
        {"archive": SimpleUploadedFile("evidence.tgz", _tree_archive(V019))},
    )
    assert again.status_code == 302
    assert EvidencePointer.objects.count() == len(rels)
    assert not Evidence.objects.exists()


def test_the_admin_import_names_an_unreadable_archive(evidence_db: None, admin_client: Any) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    page = admin_client.post(
        "/admin/evidence_app/evidencepointer/import/",
        {"archive": SimpleUploadedFile("e.tgz", b"\x1f\x8b not really gzip")},
    )
    assert page.status_code == 200
    assert "Not a readable archive" in page.content.decode()
    assert not EvidencePointer.objects.exists()
