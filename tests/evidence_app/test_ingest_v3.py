"""recipe-evidence/v3 through ingest: signed here (a registered P-256 key, and keyless with the
private Sigstore instance), both subject forms (``recipe:<name>``; the OCI artifact, from a
real local registry with the signature attached as a referrer), bound by the V3 digest; and the
hostile variants, each refused at its step with nothing stored."""

from __future__ import annotations

import hashlib
import json
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from evidence_app.models import Evidence, Signer, TrustRoot, UploadLog
from evidence_app.services import keys
from evidence_app.verification.digests import recipe_yaml_digests
from recipes_app.models import Recipe
from tests.evidence_app.conftest import BUNDLE_MEDIA_TYPE
from tests.evidence_factories import (
    FIRST_PARTY_IDENTITY,
    GITHUB_ISSUER,
    example_files,
    statement_for,
    tarball,
)
from tests.sigstore_private import PrivateSigstore, public_pem, sign_dsse_with_key

V1 = "https://aicr.run/recipe-evidence/v1"
V3 = "https://aicr.run/recipe-evidence/v3"
ARCHIVE_MEDIA_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
EMPTY_CONFIG = "application/vnd.oci.empty.v1+json"


@pytest.fixture
def keyless(private_root: TrustRoot, private_sigstore: PrivateSigstore) -> Callable[..., bytes]:
    def sign(statement: dict[str, Any]) -> bytes:
        return private_sigstore.sign_dsse(
            statement, identity=FIRST_PARTY_IDENTITY, issuer=GITHUB_ISSUER
        ).bundle

    return sign


def v3_statement(recipe: Recipe, **kw: Any) -> dict[str, Any]:
    return statement_for(recipe, predicate_type=V3, digest=kw.pop("digest", recipe.digest_v3), **kw)


def artifact_subject(statement: dict[str, Any], *, name: str, manifest_digest: str) -> None:
    """Point the statement's subject at an OCI artifact, as ``aicr evidence publish`` signs."""
    statement["subject"] = [{"name": name, "digest": {"sha256": manifest_digest.split(":")[1]}}]


def directory(statement: dict[str, Any] | None, *, bundle: bytes | None = None) -> bytes:
    """The AICR example evidence directory saying ``statement`` (signed as ``bundle``); with
    no statement, none (an artifact-subject statement is signed after the push)."""
    files = example_files()
    if statement is None:
        del files["summary-bundle/statement.intoto.json"]
    else:
        files["summary-bundle/statement.intoto.json"] = json.dumps(statement).encode()
    if bundle is not None:
        files["summary-bundle/attestation.intoto.jsonl"] = bundle.replace(b"\n", b"") + b"\n"
    return tarball(files)


def refused(result: Any, step: str, text: str, *, stored_before: int = 0) -> None:
    assert (result.failed_step, result.outcome) == (step, "refused"), result.reason
    assert text in result.reason
    assert Evidence.objects.count() == stored_before
    log = UploadLog.objects.order_by("-pk").first()
    assert (log.failed_step, log.reason) == (step, result.reason)


def bind_detail(result: Any) -> str:
    return next(s["detail"] for s in result.transcript if s["step"] == "bind")


# --- recipe:<name> subjects ----------------------------------------------------------------


def test_it_verifies_and_binds_key_signed_v3_evidence_by_the_v3_digest(
    ingest: Any, example_recipe: Recipe
) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    keys.signing_key_register(name="lab p256", public_key_pem=public_pem(key))

    result = ingest(sign_dsse_with_key(v3_statement(example_recipe), key))

    assert result.verdict == "verified", result.reason
    evidence = Evidence.objects.get()
    assert (evidence.recipe, evidence.predicate_type) == (example_recipe, V3)
    assert evidence.subject_digest == example_recipe.digest_v3 != example_recipe.digest
    assert "by V3 digest (metadata.version excluded)" in bind_detail(result)


def test_it_verifies_keyless_v3_evidence_with_a_profile(
    ingest: Any, keyless: Callable[..., bytes], example_recipe: Recipe
) -> None:
    statement = v3_statement(example_recipe)
    statement["predicate"]["profile"] = {
        "selection": "gpuStack=gcp-managed",
        "policyDescriptorIdentity": "sha256:" + "cd" * 32,
    }

    result = ingest(keyless(statement))

    assert result.verdict == "verified", result.reason
    assert Evidence.objects.get().predicate["profile"]["selection"] == "gpuStack=gcp-managed"


def test_v1_evidence_still_binds_by_the_legacy_digest(
    ingest: Any, keyless: Callable[..., bytes], example_recipe: Recipe
) -> None:
    result = ingest(keyless(statement_for(example_recipe)))

    assert result.verdict == "verified", result.reason
    assert "by legacy digest" in bind_detail(result)


def test_the_same_recipe_stamped_by_another_aicr_version_binds_under_v3_only(
    ingest: Any, keyless: Callable[..., bytes], example_recipe: Recipe
) -> None:
    # The catalog's recipe as an aicr v1.0.0 binary would stamp it: only metadata.version moves.
    stamp = f"\n    version: {example_recipe.catalog.aicr_version}\n"
    assert stamp in example_recipe.canonical_yaml
    restamped = recipe_yaml_digests(
        example_recipe.canonical_yaml.replace(stamp, "\n    version: v1.0.0\n")
    )
    assert restamped.legacy != example_recipe.digest

    v3 = ingest(keyless(v3_statement(example_recipe, digest=restamped.v3)))
    v1 = ingest(keyless(statement_for(example_recipe, digest=restamped.legacy)))

    assert v3.verdict == "verified", v3.reason
    assert Evidence.objects.get().recipe == example_recipe
    assert "of the current catalog" in bind_detail(v3)
    assert "stale" not in bind_detail(v3)
    refused(v1, "bind", "unknown recipe", stored_before=1)


def test_a_v3_record_carrying_the_legacy_digest_does_not_bind(
    ingest: Any, keyless: Callable[..., bytes], example_recipe: Recipe
) -> None:
    result = ingest(keyless(v3_statement(example_recipe, digest=example_recipe.digest)))

    refused(result, "bind", "wrong digest scheme")
    assert "legacy digest of recipe 'h100-eks-ubuntu-training-kubeflow'" in result.reason
    assert not Signer.objects.exists()


def test_an_unknown_evidence_version_is_refused_at_the_statement(
    ingest: Any, keyless: Callable[..., bytes], example_recipe: Recipe
) -> None:
    statement = v3_statement(example_recipe)
    statement["predicateType"] = "https://aicr.run/recipe-evidence/v4"

    result = ingest(keyless(statement))

    refused(result, "statement", "'https://aicr.run/recipe-evidence/v4'")
    assert V3 in result.reason


# --- evidence directories ------------------------------------------------------------------


def test_it_verifies_a_v3_evidence_directory_against_its_recipe_yaml(
    ingest: Any, keyless: Callable[..., bytes], example_recipe: Recipe
) -> None:
    statement = v3_statement(example_recipe)

    result = ingest(directory(statement, bundle=keyless(statement)), filename="e.tar.gz")

    assert result.verdict == "verified", result.reason
    manifest = next(s["detail"] for s in result.transcript if s["step"] == "manifest")
    assert "recipe.yaml has predicate.recipe's V3 digest" in manifest


def test_a_v3_directory_whose_predicate_recipe_disagrees_with_recipe_yaml_is_refused(
    ingest: Any, keyless: Callable[..., bytes], example_recipe: Recipe
) -> None:
    statement = v3_statement(example_recipe)
    files = example_files()
    files["summary-bundle/recipe.yaml"] += b"# another resolution\nextra: true\n"
    # manifest.json must still list the file as it is, so only the recipe identity is wrong
    files = _relisted(files, statement)
    bundle = keyless(statement)
    files["summary-bundle/attestation.intoto.jsonl"] = bundle.replace(b"\n", b"") + b"\n"

    result = ingest(tarball(files), filename="e.tar.gz")

    refused(result, "manifest", "recipe.yaml: its V3 digest")
    assert "differs from predicate.recipe.digest" in result.reason


@pytest.mark.parametrize(
    ("recipe_yaml", "text"),
    [
        (b"apiVersion: [aicr.run/v1alpha2\n", "cannot compute the recipe digest"),
        (
            b"apiVersion: aicr.run/v1\n---\napiVersion: aicr.run/v1alpha2\n",
            "more than one document",
        ),
        # another apiVersion is other content: the V3 digest covers apiVersion
        (None, "recipe.yaml: its V3 digest"),
    ],
)
def test_a_v3_directory_with_a_malformed_or_restamped_recipe_yaml_is_refused(
    ingest: Any,
    keyless: Callable[..., bytes],
    example_recipe: Recipe,
    recipe_yaml: bytes | None,
    text: str,
) -> None:
    statement = v3_statement(example_recipe)
    files = example_files()
    original = files["summary-bundle/recipe.yaml"]
    files["summary-bundle/recipe.yaml"] = recipe_yaml or original.replace(
        b"apiVersion: aicr.run/v1alpha2", b"apiVersion: aicr.run/v1", 1
    )
    files = _relisted(files, statement)
    files["summary-bundle/attestation.intoto.jsonl"] = (
        keyless(statement).replace(b"\n", b"") + b"\n"
    )

    refused(ingest(tarball(files), filename="e.tar.gz"), "manifest", text)


def test_an_uploaded_directory_with_an_artifact_subject_is_sent_to_its_oci_reference(
    ingest: Any, keyless: Callable[..., bytes], example_recipe: Recipe
) -> None:
    statement = v3_statement(example_recipe)
    artifact_subject(statement, name="ghcr.io/acme/evidence", manifest_digest="sha256:" + "ab" * 32)

    as_directory = ingest(directory(statement, bundle=keyless(statement)), filename="e.tar.gz")
    refused(as_directory, "statement", "submit it by its OCI reference")

    as_bundle = ingest(keyless(statement))
    refused(as_bundle, "statement", "a bare bundle does not carry the recipe.yaml")


def _relisted(files: dict[str, bytes], statement: dict[str, Any]) -> dict[str, bytes]:
    """``files`` with manifest.json re-listing its entries' sizes and digests, and the
    statement's predicate.manifest following it (as an AICR that wrote these files would)."""
    root = "summary-bundle/"
    manifest = json.loads(files[root + "manifest.json"])
    for entry in manifest["files"]:
        content = files[root + entry["path"]]
        entry["size"] = len(content)
        entry["sha256"] = "sha256:" + hashlib.sha256(content).hexdigest()
    files = dict(files)
    files[root + "manifest.json"] = json.dumps(manifest).encode()
    statement["predicate"]["manifest"]["digest"] = (
        "sha256:" + hashlib.sha256(files[root + "manifest.json"]).hexdigest()
    )
    files[root + "statement.intoto.json"] = json.dumps(statement).encode()
    return files


# --- OCI artifacts signed after the push (referrers) ---------------------------------------


def _http(method: str, url: str, body: bytes = b"", content_type: str = "") -> Any:
    request = urllib.request.Request(url, data=body or None, method=method)
    if content_type:
        request.add_header("Content-Type", content_type)
    request.add_header("Accept", f"{OCI_MANIFEST}, {INDEX}")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    return opener.open(request, timeout=10)


def _blob(registry: str, repo: str, content: bytes) -> dict[str, Any]:
    digest = "sha256:" + hashlib.sha256(content).hexdigest()
    with _http("POST", f"http://{registry}/v2/{repo}/blobs/uploads/") as started:
        location = started.headers["Location"]
    if location.startswith("/"):
        location = f"http://{registry}{location}"
    joiner = "&" if "?" in location else "?"
    with _http("PUT", f"{location}{joiner}digest={digest}", content, "application/octet-stream"):
        pass
    return {"digest": digest, "size": len(content)}


def attach_signature(registry: str, ref: str, bundle: bytes, *, repo: str = "aicr-evidence") -> str:
    """Attach ``bundle`` as a referrer of ``ref`` the way ``aicr evidence sign`` does, through
    the referrers tag schema (this registry has no Referrers API); the referrer's digest."""
    subject_digest = ref.rpartition("@")[2]
    with _http("GET", f"http://{registry}/v2/{repo}/manifests/{subject_digest}") as found:
        subject_size = len(found.read())
    config = _blob(registry, repo, b"{}")
    layer = _blob(registry, repo, bundle)
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "artifactType": BUNDLE_MEDIA_TYPE,
            "config": {"mediaType": EMPTY_CONFIG, **config},
            "layers": [{"mediaType": BUNDLE_MEDIA_TYPE, **layer}],
            "subject": {"mediaType": OCI_MANIFEST, "digest": subject_digest, "size": subject_size},
        }
    ).encode()
    digest = "sha256:" + hashlib.sha256(manifest).hexdigest()
    with _http("PUT", f"http://{registry}/v2/{repo}/manifests/{digest}", manifest, OCI_MANIFEST):
        pass
    index = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": INDEX,
            "manifests": [
                {
                    "mediaType": OCI_MANIFEST,
                    "digest": digest,
                    "size": len(manifest),
                    "artifactType": BUNDLE_MEDIA_TYPE,
                }
            ],
        }
    ).encode()
    tag = subject_digest.replace(":", "-")
    with _http("PUT", f"http://{registry}/v2/{repo}/manifests/{tag}", index, INDEX):
        pass
    return digest


@pytest.fixture
def oci(settings: Any) -> Iterator[None]:
    from aicr_site.celery import app as celery_app

    settings.EVIDENCE_OCI_ENABLED = True
    settings.EVIDENCE_OCI_ALLOW_LOOPBACK_HTTP = True
    settings.EVIDENCE_OCI_TIMEOUT_SECONDS = 5
    eager = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True  # the pull runs here, not on a broker's worker
    yield
    celery_app.conf.task_always_eager = eager


def _pull(ref: str, django_capture_on_commit_callbacks: Any) -> UploadLog:
    from evidence_app.services.oci import oci_upload_request

    with django_capture_on_commit_callbacks(execute=True):
        log = oci_upload_request(oci_ref=ref, user=None)
    log.refresh_from_db()
    return log


def test_it_verifies_an_oci_artifact_signed_after_the_push_and_binds_it(
    oci: None,
    push: Callable[..., str],
    registry: str,
    keyless: Callable[..., bytes],
    example_recipe: Recipe,
    django_capture_on_commit_callbacks: Any,
) -> None:
    # The pushed directory carries no statement.intoto.json: the signed statement names the
    # artifact, whose digest exists only once the directory is pushed.
    ref = push(directory(None), name="sb.tar.gz", media_type=ARCHIVE_MEDIA_TYPE, tag="ok")
    signed = v3_statement(example_recipe)
    artifact_subject(signed, name=ref.partition("@")[0], manifest_digest=ref.rpartition("@")[2])
    attach_signature(registry, ref, keyless(signed))

    log = _pull(ref, django_capture_on_commit_callbacks)

    assert log.verdict == "verified", log.reason
    evidence = Evidence.objects.get()
    assert (evidence.recipe, evidence.oci_ref, evidence.container) == (example_recipe, ref, "oci")
    assert evidence.subject_digest == example_recipe.digest_v3
    statement_step = next(s["detail"] for s in log.transcript if s["step"] == "statement")
    assert f"subject OCI artifact {ref.rpartition('@')[2]}" in statement_step


def test_an_artifact_subject_naming_another_artifact_is_refused(
    oci: None,
    push: Callable[..., str],
    registry: str,
    keyless: Callable[..., bytes],
    example_recipe: Recipe,
    django_capture_on_commit_callbacks: Any,
) -> None:
    ref = push(directory(None), name="sb.tar.gz", media_type=ARCHIVE_MEDIA_TYPE, tag="other")
    signed = v3_statement(example_recipe)
    # signed for a different artifact (say, an earlier push), attached to this one
    artifact_subject(signed, name=ref.partition("@")[0], manifest_digest="sha256:" + "ee" * 32)
    attach_signature(registry, ref, keyless(signed))

    log = _pull(ref, django_capture_on_commit_callbacks)

    assert (log.failed_step, log.outcome) == ("statement", "refused"), log.reason
    assert "is not the digest of the OCI artifact the evidence was pulled as" in log.reason
    assert not Evidence.objects.exists()


def test_an_oci_artifact_whose_predicate_recipe_disagrees_with_recipe_yaml_is_refused(
    oci: None,
    push: Callable[..., str],
    registry: str,
    keyless: Callable[..., bytes],
    example_recipe: Recipe,
    django_capture_on_commit_callbacks: Any,
) -> None:
    ref = push(directory(None), name="sb.tar.gz", media_type=ARCHIVE_MEDIA_TYPE, tag="lie")
    # the legacy digest of this very recipe.yaml: a known recipe's, but the wrong scheme for v3
    signed = v3_statement(example_recipe, digest=example_recipe.digest)
    artifact_subject(signed, name=ref.partition("@")[0], manifest_digest=ref.rpartition("@")[2])
    attach_signature(registry, ref, keyless(signed))

    log = _pull(ref, django_capture_on_commit_callbacks)

    assert (log.failed_step, log.outcome) == ("manifest", "refused"), log.reason
    assert "it is the file's legacy digest" in log.reason
    assert not Evidence.objects.exists()


@pytest.mark.parametrize("same_predicate", [True, False], ids=["same", "other-predicate"])
def test_the_pushed_directory_may_carry_its_unsigned_recipe_statement(
    oci: None,
    push: Callable[..., str],
    registry: str,
    keyless: Callable[..., bytes],
    example_recipe: Recipe,
    django_capture_on_commit_callbacks: Any,
    same_predicate: bool,
) -> None:
    """``aicr evidence publish`` pushes the directory with the statement it was emitted with
    (subject ``recipe:<name>``) and signs a copy naming the artifact: the unsigned file must
    say the same predicate about the recipe, no more."""
    unsigned = v3_statement(example_recipe)
    if not same_predicate:
        unsigned["predicate"]["aicrVersion"] = "v9.9.9"
    tag = "with-statement" if same_predicate else "other-statement"
    ref = push(directory(unsigned), name="sb.tar.gz", media_type=ARCHIVE_MEDIA_TYPE, tag=tag)
    signed = v3_statement(example_recipe)
    artifact_subject(signed, name=ref.partition("@")[0], manifest_digest=ref.rpartition("@")[2])
    attach_signature(registry, ref, keyless(signed))

    log = _pull(ref, django_capture_on_commit_callbacks)

    if same_predicate:
        assert log.verdict == "verified", log.reason
        assert Evidence.objects.get().oci_ref == ref
    else:
        assert (log.failed_step, log.outcome) == ("manifest", "refused"), log.reason
        assert "statement.intoto.json: differs from the signed statement" in log.reason
        assert not Evidence.objects.exists()
