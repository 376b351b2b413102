"""Evidence identity is the signed statement and its signer, not the upload's bytes.

Every wrapper of one signed statement — bundle JSON re-indented or with keys reordered, the
evidence directory re-compressed or re-tarred, with or without the artifact, pulled from an OCI
registry — is one record; a re-upload answers 200 with it, and a withdrawn record stays
withdrawn (and not counted) whatever wrapper brings it back.
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone

from evidence_app.models import Evidence, TrustRoot, UploadLog
from evidence_app.services.withdrawal import evidence_withdraw
from recipes_app.models import Recipe
from tests.evidence_app.conftest import BUNDLE_MEDIA_TYPE
from tests.evidence_factories import (
    COMMUNITY_IDENTITY,
    FIRST_PARTY_IDENTITY,
    GITHUB_ISSUER,
    example_files,
    example_statement,
    signed_example_tarball,
    statement_for,
)
from tests.sigstore_private import PrivateSigstore

Ingest = Callable[..., Any]


@pytest.fixture
def statement(example_recipe: Recipe) -> dict[str, Any]:
    return statement_for(example_recipe, attested_at=datetime.now(UTC) - timedelta(hours=1))


@pytest.fixture
def bundle(
    private_root: TrustRoot, private_sigstore: PrivateSigstore, statement: dict[str, Any]
) -> bytes:
    return private_sigstore.sign_dsse(
        statement, identity=FIRST_PARTY_IDENTITY, issuer=GITHUB_ISSUER
    ).bundle


def _reindented(bundle: bytes) -> bytes:
    return json.dumps(json.loads(bundle), indent=3).encode()


def _keys_reversed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _keys_reversed(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_keys_reversed(v) for v in value]
    return value


def _reordered(bundle: bytes) -> bytes:
    return json.dumps(_keys_reversed(json.loads(bundle)), separators=(",", ":")).encode()


def _retarred(files: dict[str, bytes], *, level: int, fmt: int, mtime: int) -> bytes:
    """The same files in reverse order, another tar format and mtime, gzip at ``level``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tar:
        for name, content in sorted(files.items(), reverse=True):
            info = tarfile.TarInfo(name)
            info.size = len(content)
            info.mtime = mtime
            tar.addfile(info, io.BytesIO(content))
    return gzip.compress(buf.getvalue(), compresslevel=level, mtime=mtime)


def _directory(bundle: bytes) -> dict[str, bytes]:
    files = example_files()
    files["summary-bundle/attestation.intoto.jsonl"] = bundle.replace(b"\n", b"") + b"\n"
    return files


def _assert_same_record(first: Any, again: Any) -> None:
    assert (first.outcome, first.created) == ("created", True), first.reason
    assert (again.verdict, again.outcome, again.created) == ("verified", "existing", False), (
        again.reason
    )
    assert again.evidence.pk == first.evidence.pk
    assert Evidence.objects.count() == 1
    assert UploadLog.objects.filter(evidence=first.evidence).count() == 2


@pytest.mark.parametrize(
    "rewrap",
    [
        pytest.param(_reindented, id="bundle-json-reindented"),
        pytest.param(_reordered, id="bundle-json-keys-reordered-compact"),
        pytest.param(lambda b: b + b"\n\n  ", id="bundle-json-trailing-whitespace"),
    ],
)
def test_a_rewrapped_bundle_is_the_same_record(
    ingest: Ingest, bundle: bytes, rewrap: Callable[[bytes], bytes]
) -> None:
    first = ingest(bundle)
    data = rewrap(bundle)
    assert data != bundle

    again = ingest(data)

    _assert_same_record(first, again)
    assert "is this signed statement by this signer" in again.reason
    assert bytes(Evidence.objects.get().content) == bundle  # the first upload's bytes stay


@pytest.mark.parametrize(
    ("level", "fmt", "mtime"),
    [
        pytest.param(1, tarfile.PAX_FORMAT, 0, id="regzipped-level-1"),
        pytest.param(9, tarfile.PAX_FORMAT, 0, id="regzipped-level-9"),
        pytest.param(6, tarfile.GNU_FORMAT, 1_700_000_000, id="retarred-gnu-reordered"),
        pytest.param(6, tarfile.USTAR_FORMAT, 42, id="retarred-ustar-reordered"),
    ],
)
def test_a_rewrapped_evidence_directory_is_the_same_record(
    ingest: Ingest,
    private_root: TrustRoot,
    private_sigstore: PrivateSigstore,
    level: int,
    fmt: int,
    mtime: int,
) -> None:
    signed = private_sigstore.sign_dsse(
        example_statement(), identity=FIRST_PARTY_IDENTITY, issuer=GITHUB_ISSUER
    )
    first = ingest(signed_example_tarball(signed.bundle), filename="evidence.tar.gz")
    data = _retarred(_directory(signed.bundle), level=level, fmt=fmt, mtime=mtime)

    again = ingest(data, filename="copy.tar.gz")

    _assert_same_record(first, again)


def test_the_bare_bundle_and_its_evidence_directory_are_the_same_record(
    ingest: Ingest, private_root: TrustRoot, private_sigstore: PrivateSigstore
) -> None:
    signed = private_sigstore.sign_dsse(
        example_statement(), identity=FIRST_PARTY_IDENTITY, issuer=GITHUB_ISSUER
    )

    first = ingest(signed_example_tarball(signed.bundle, gz=False), filename="evidence.tar")
    again = ingest(signed.bundle)

    _assert_same_record(first, again)


def test_a_bundle_with_and_without_its_artifact_is_the_same_record(
    ingest: Ingest, private_root: TrustRoot, private_sigstore: PrivateSigstore
) -> None:
    artifact = example_files()["summary-bundle/recipe.yaml"]  # the subject's recipe file
    bundle = private_sigstore.sign_dsse(
        example_statement(), identity=FIRST_PARTY_IDENTITY, issuer=GITHUB_ISSUER
    ).bundle

    first = ingest(bundle, artifact=artifact)
    again = ingest(_reindented(bundle))

    _assert_same_record(first, again)


def test_a_new_certificate_for_the_same_identity_is_the_same_record(
    ingest: Ingest,
    bundle: bytes,
    private_sigstore: PrivateSigstore,
    statement: dict[str, Any],
) -> None:
    """Signing the same statement again (a new Fulcio certificate, a new log entry)."""
    resigned = private_sigstore.sign_dsse(
        statement, identity=FIRST_PARTY_IDENTITY, issuer=GITHUB_ISSUER
    ).bundle

    _assert_same_record(ingest(bundle), ingest(resigned))


def test_the_same_statement_by_another_signer_is_another_record(
    ingest: Ingest,
    bundle: bytes,
    private_sigstore: PrivateSigstore,
    statement: dict[str, Any],
) -> None:
    other = private_sigstore.sign_dsse(
        statement, identity=COMMUNITY_IDENTITY, issuer=GITHUB_ISSUER
    ).bundle

    first, second = ingest(bundle), ingest(other)

    assert (first.outcome, second.outcome) == ("created", "created")
    assert first.evidence.payload_sha256 == second.evidence.payload_sha256
    assert first.evidence.signer_id != second.evidence.signer_id
    assert Evidence.objects.count() == 2


def test_a_withdrawn_record_stays_withdrawn_whatever_the_wrapper(
    ingest: Ingest,
    api: Callable[..., Client],
    make_token: Callable[..., str],
    private_root: TrustRoot,
    private_sigstore: PrivateSigstore,
) -> None:
    """The attack of issue 6: download the withdrawn record's bytes, re-gzip, upload again."""
    signed = private_sigstore.sign_dsse(
        example_statement(), identity=FIRST_PARTY_IDENTITY, issuer=GITHUB_ISSUER
    )
    first = ingest(signed_example_tarball(signed.bundle), filename="evidence.tar.gz")
    evidence = first.evidence
    assert Evidence.objects.counted().filter(pk=evidence.pk).exists()
    evidence_withdraw(
        evidence=evidence, by=None, roles={"maintainer"}, reason="ran on the wrong driver"
    )
    regzipped = gzip.compress(gzip.decompress(bytes(evidence.content)), compresslevel=1)
    token = make_token("carol", "contributor")

    response = api(token).post(
        "/api/v1/evidence/",
        {"bundle": SimpleUploadedFile("again.tar.gz", regzipped, "application/gzip")},
    )

    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["id"], body["verdict"], body["created"]) == (evidence.pk, "verified", False)
    assert body["withdrawn"] is True
    assert "ran on the wrong driver" in body["reason"]
    assert "stays withdrawn: not counted" in body["reason"]
    assert Evidence.objects.count() == 1
    stored = Evidence.objects.get()
    assert stored.withdrawn_at is not None
    assert not Evidence.objects.counted().exists()


def test_the_upload_page_says_the_known_record_is_withdrawn(
    client: Client,
    ingest: Ingest,
    bundle: bytes,
    make_token: Callable[..., str],
) -> None:
    from evidence_app.services.tokens import user_with_role

    first = ingest(bundle)
    Evidence.objects.filter(pk=first.evidence.pk).update(
        withdrawn_at=timezone.now(), withdrawal_reason="superseded by a rerun"
    )
    client.force_login(user_with_role(username="alice", role="contributor"))

    response = client.post(
        "/evidence/new/",
        {"bundle": SimpleUploadedFile("b.sigstore.json", _reindented(bundle), BUNDLE_MEDIA_TYPE)},
    )

    assert response.status_code == 303, response.content[:300]
    page = client.get(response["Location"]).content.decode()
    assert "Already here: withdrawn earlier" in page
    assert "superseded by a rerun" in page
    assert "stays withdrawn and is not counted" in page
    assert Evidence.objects.count() == 1


def test_an_oci_copy_of_a_stored_statement_is_the_same_record(
    ingest: Ingest,
    bundle: bytes,
    push: Callable[..., str],
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    from aicr_site.celery import app as celery_app
    from evidence_app.services.oci import oci_upload_request

    settings.EVIDENCE_OCI_ENABLED = True
    settings.EVIDENCE_OCI_ALLOW_LOOPBACK_HTTP = True
    first = ingest(bundle)
    ref = push(_reindented(bundle), name="evidence.sigstore.json", media_type=BUNDLE_MEDIA_TYPE)
    eager = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    try:
        with django_capture_on_commit_callbacks(execute=True):
            log = oci_upload_request(oci_ref=ref, user=None)
    finally:
        celery_app.conf.task_always_eager = eager
    log.refresh_from_db()

    assert (log.verdict, log.outcome, log.created) == ("verified", "existing", False), log.reason
    assert log.evidence_id == first.evidence.pk
    assert Evidence.objects.count() == 1


def test_the_same_bytes_as_a_duplicate_withdrawn_by_the_migration_answer_with_it(
    ingest: Ingest, bundle: bytes
) -> None:
    """A record migration 0005 left without an identity (a re-wrapped copy, withdrawn): its
    exact bytes again find it through the unique sha256, never a second record."""
    first = ingest(bundle)
    Evidence.objects.filter(pk=first.evidence.pk).update(
        payload_sha256="", withdrawn_at=timezone.now(), withdrawal_reason="duplicate of #0"
    )

    again = ingest(bundle)

    assert (again.outcome, again.created) == ("existing", False), again.reason
    assert again.evidence.pk == first.evidence.pk
    assert "has these exact bytes" in again.reason
    assert "stays withdrawn" in again.reason
    assert Evidence.objects.count() == 1
