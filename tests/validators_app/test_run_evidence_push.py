"""Run evidence pushed to a real registry (Debian's docker-registry on loopback) as
``aicr evidence publish`` lays it out, signed keyless by the tests' private Sigstore instance,
then read back the way AICR's repository would: the pointer the push wrote is imported with
the pointer-tree importer, which pulls the artifact and its signature referrer through the
site's OCI path and verifies them. Push failures (registry down, credentials refused) are
stored with their reason and retried; the run's verdict and evidence never change."""

from __future__ import annotations

import html
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from aicr_site.celery import app as celery_app
from evidence_app.corroborate.allowlist import source_slug
from evidence_app.models import Evidence, EvidencePointer
from evidence_app.services import oci_push, pointers
from evidence_app.services.site_key import generate_pem
from recipes_app.models import Recipe
from tests.oci_registry import bcrypt_line, free_port, running_registry
from tests.sigstore_servers import OIDC_ISSUER, RUNS_IDENTITY, LoopbackSigstore
from tests.validators_app.evidence_support import finished_run
from tests.validators_app.runs_support import RECIPE
from validators_app.models import PushState, RunOciPublication, ValidationRun
from validators_app.services import runs
from validators_app.services.publication import push_run_evidence

pytestmark = pytest.mark.django_db
REPO = "aicr-runs"


@pytest.fixture
def recipe(real_catalog: Any) -> Recipe:
    return Recipe.objects.current().get(name=RECIPE, profile="")


@pytest.fixture
def fresh_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A registry of this test's own: the same run pushed in two tests is the same artifact
    (its bytes are a function of the run), and a referrer left by one would be read by the
    other."""
    with running_registry(tmp_path_factory.mktemp("registry")) as running:
        yield running


@pytest.fixture
def push_to(settings: Any, fresh_registry: str) -> Iterator[str]:
    """Pushes go to the loopback registry; pulls from it are allowed (pointers pull only from
    listed registries); OCI tasks run in process. A fresh site key, and no cached
    verification policy or badges from another test's key."""
    cache.clear()
    settings.SITE_SIGNING_KEY = generate_pem().decode()
    settings.SITE_SIGNING_LOCAL_KEY_FILE = None
    settings.VALIDATION_IMAGE_REGISTRY = ""
    settings.VALIDATION_IMAGE_TAG = ""
    registry = fresh_registry
    settings.RUN_EVIDENCE_OCI_REPOSITORY = f"{registry}/{REPO}"
    settings.RUN_EVIDENCE_OCI_USERNAME = ""
    settings.RUN_EVIDENCE_OCI_PASSWORD = ""
    settings.RUN_EVIDENCE_OCI_PASSWORD_FILE = ""
    settings.EVIDENCE_OCI_ENABLED = True
    settings.EVIDENCE_OCI_ALLOW_LOOPBACK_HTTP = True
    settings.EVIDENCE_OCI_ALLOWED_REGISTRIES = [registry]
    settings.EVIDENCE_OCI_TIMEOUT_SECONDS = 5
    eager = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield registry
    celery_app.conf.task_always_eager = eager


def _get(url: str, accept: str) -> dict[str, Any]:
    request = urllib.request.Request(url, headers={"Accept": accept})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=10) as answer:
        return json.loads(answer.read())


def _publish(recipe: Recipe, **kw: Any) -> ValidationRun:
    run = runs.run_publish(run=finished_run(recipe, **kw))
    run.refresh_from_db()
    return run


def test_a_keyless_run_is_pushed_and_its_pointer_imports_as_counted_evidence(
    push_to: str,
    sigstore: LoopbackSigstore,
    trusted: None,
    runs_identity_allowlisted: None,
    recipe: Recipe,
    tmp_path: Path,
    django_capture_on_commit_callbacks: Any,
    client: Client,
) -> None:
    run = _publish(recipe)
    own = run.evidence
    assert own is not None
    publication = run.oci_publication
    assert (publication.state, publication.reason) == (PushState.PUSHED, "")
    assert publication.keyless
    digest = publication.oci_ref.rpartition("@")[2]
    assert publication.oci_ref == f"{push_to}/{REPO}@{digest}"
    assert publication.reference == f"{push_to}/{REPO}:{RECIPE}-{run.aicr_run_id}"
    slug = source_slug(OIDC_ISSUER, RUNS_IDENTITY)
    assert publication.pointer_path == (
        f"recipes/evidence/{RECIPE}/{slug}/sha256-{digest.removeprefix('sha256:')}.yaml"
    )
    # Keyless signing happened twice: the run's own bundle, then the pushed artifact's.
    assert sigstore.requests == ["/api/v2/signingCert", "/api/v1/log/entries"] * 2

    # The artifact is AICR's layout, and the signature hangs off it as a referrer.
    manifest = _get(f"http://{push_to}/v2/{REPO}/manifests/{digest}", oci_push.oci.OCI_MANIFEST)
    assert manifest["artifactType"] == oci_push.AICR_ARTIFACT_TYPE
    assert [layer["mediaType"] for layer in manifest["layers"]] == [oci_push.LAYER_MEDIA_TYPE]
    assert manifest["annotations"]["org.opencontainers.image.created"] == "1970-01-01T00:00:00Z"
    index = _get(
        f"http://{push_to}/v2/{REPO}/manifests/{digest.replace(':', '-')}",
        oci_push.INDEX_MEDIA_TYPE,
    )
    assert [m["digest"] for m in index["manifests"]] == [publication.referrer_digest]
    referrer = _get(
        f"http://{push_to}/v2/{REPO}/manifests/{publication.referrer_digest}",
        oci_push.oci.OCI_MANIFEST,
    )
    assert referrer["artifactType"] == oci_push.SIGSTORE_BUNDLE_MEDIA_TYPE
    assert referrer["subject"]["digest"] == digest

    # The API and the run page give the pointer and the commands that verify the push.
    shown = client.get(f"/api/v1/runs/{run.pk}/").json()["oci_publication"]
    assert (shown["state"], shown["oci_ref"]) == ("pushed", publication.oci_ref)
    assert shown["pointer_url"].endswith(f"/api/v1/runs/{run.pk}/pointer.yaml")
    download = client.get(f"/api/v1/runs/{run.pk}/pointer.yaml")
    assert download.status_code == 200
    assert download.content.decode() == publication.pointer_yaml
    assert download["X-Pointer-Path"] == publication.pointer_path
    page = html.unescape(client.get(f"/runs/{run.pk}/").content.decode())
    assert "Contribute upstream" in page
    assert publication.pointer_yaml in page
    assert f"aicr evidence verify {publication.oci_ref}" in page
    assert f"aicr evidence verify {publication.pointer_path}" in page

    # AICR's repository takes the pointer: imported as a tree, it pulls and verifies the push.
    evidence_dir = tmp_path / "recipes" / "evidence"
    evidence_dir.mkdir(parents=True)
    (evidence_dir / "allowlist.yaml").write_text(
        f"schemaVersion: 1.0.0\ncommunity:\n  - issuer: {OIDC_ISSUER}\n    source: {slug}\n"
    )
    written = tmp_path / publication.pointer_path
    written.parent.mkdir(parents=True)
    written.write_text(publication.pointer_yaml)
    with django_capture_on_commit_callbacks(execute=True):
        result = pointers.pointer_import(path=tmp_path)
    pointers.pointers_settle()

    assert result.outcomes == {"created": 1}
    row = EvidencePointer.objects.get()
    assert (row.state, row.reason) == ("ingested", "")
    upstream = row.evidence
    assert upstream is not None
    assert upstream.pk != own.pk
    assert upstream.oci_ref == publication.oci_ref
    assert upstream.verdict == "verified"
    assert (upstream.signer.identity, upstream.signer.issuer) == (RUNS_IDENTITY, OIDC_ISSUER)
    assert upstream.signer_id == own.signer_id
    # The same evidence: one predicate, one recipe, one signer; counted like the run's own.
    assert upstream.predicate == own.predicate
    assert upstream.recipe_id == own.recipe_id
    assert set(Evidence.objects.counted().values_list("pk", flat=True)) == {own.pk, upstream.pk}
    # ... and the verdict the run shows is the run's own.
    assert run.status == "passed"


def test_key_signed_evidence_is_pushed_but_has_no_pointer_to_contribute(
    push_to: str, recipe: Recipe, settings: Any, client: Client
) -> None:
    settings.SITE_SIGSTORE_IDENTITY_TOKEN = ""
    settings.SITE_SIGSTORE_IDENTITY_TOKEN_FILE = ""

    run = _publish(recipe)

    publication = run.oci_publication
    assert publication.state == PushState.PUSHED
    assert not publication.keyless
    assert (publication.pointer_path, publication.pointer_yaml) == ("", "")
    assert "key-signed" in publication.reason
    assert "counts on this site only" in publication.reason
    assert "accepts keyless signatures only" in publication.reason
    assert run.evidence is not None
    page = html.unescape(client.get(f"/runs/{run.pk}/").content.decode())
    assert "Key-signed: it counts on this site only." in page
    assert f"aicr evidence verify {publication.oci_ref}" in page
    assert client.get(f"/api/v1/runs/{run.pk}/pointer.yaml").status_code == 404


def test_an_unreachable_registry_is_recorded_and_a_retry_pushes(
    push_to: str, recipe: Recipe, settings: Any, client: Client
) -> None:
    settings.RUN_EVIDENCE_OCI_REPOSITORY = f"127.0.0.1:{free_port()}/{REPO}"  # nothing listens

    run = _publish(recipe)

    publication = run.oci_publication
    assert publication.state == PushState.FAILED
    assert "unreachable" in publication.reason
    assert (publication.oci_ref, publication.pointer_yaml) == ("", "")
    assert (run.status, run.publish_error) == ("passed", "")
    evidence_pk = run.evidence_id
    page = html.unescape(client.get(f"/runs/{run.pk}/").content.decode())
    assert f"Not pushed to the OCI registry (1 attempt): {publication.reason}" in page
    assert f"manage.py push_run_evidence --run {run.pk}" in page
    missing = client.get(f"/api/v1/runs/{run.pk}/pointer.yaml")
    assert missing.status_code == 404
    assert "unreachable" in missing.json()["detail"]

    settings.RUN_EVIDENCE_OCI_REPOSITORY = f"{push_to}/{REPO}"
    call_command("push_run_evidence")

    publication.refresh_from_db()
    assert (publication.state, publication.attempts) == ("pushed", 2)
    assert publication.reason.startswith("key-signed")  # no token in this test
    assert publication.oci_ref.startswith(f"{push_to}/{REPO}@sha256:")
    run.refresh_from_db()
    assert run.evidence_id == evidence_pk
    # A pushed run is not pushed again.
    call_command("push_run_evidence")
    publication.refresh_from_db()
    assert publication.attempts == 2


def test_a_retry_is_read_back_with_its_new_signature(
    push_to: str, sigstore: LoopbackSigstore, recipe: Recipe, settings: Any
) -> None:
    """The first push is signed keyless by an instance this site does not trust (its read-back
    fails); the retry, key-signed, attaches a second referrer to the same artifact, and that
    one is what is read back."""
    settings.SITE_SIGNING_KEY = generate_pem().decode()  # the sigstore fixture unset it
    settings.SITE_SIGSTORE_IDENTITY_TOKEN = ""  # the run's own evidence: key-signed
    settings.RUN_EVIDENCE_OCI_REPOSITORY = ""  # published, not pushed yet
    run = _publish(recipe)
    settings.RUN_EVIDENCE_OCI_REPOSITORY = f"{push_to}/{REPO}"
    settings.SITE_SIGSTORE_IDENTITY_TOKEN = sigstore.oidc.token()  # an untrusted instance
    publication = push_run_evidence(run)
    assert publication is not None
    assert publication.state == PushState.FAILED
    assert "does not verify at step signature" in publication.reason

    settings.SITE_SIGSTORE_IDENTITY_TOKEN = ""
    publication = push_run_evidence(run)

    assert publication is not None
    assert (publication.state, publication.keyless) == (PushState.PUSHED, False)
    tag = publication.oci_ref.rpartition("@")[2].replace(":", "-")
    index = _get(f"http://{push_to}/v2/{REPO}/manifests/{tag}", oci_push.INDEX_MEDIA_TYPE)
    assert len(index["manifests"]) == 2
    assert index["manifests"][0]["digest"] == publication.referrer_digest


def test_credentials_are_asked_for_refused_then_accepted_and_never_shown(
    push_to: str,
    recipe: Recipe,
    settings: Any,
    tmp_path: Path,
    client: Client,
) -> None:
    secret = "s3cret-registry-password"
    with running_registry(tmp_path, htpasswd=bcrypt_line("pusher", secret)) as guarded:
        settings.RUN_EVIDENCE_OCI_REPOSITORY = f"{guarded}/{REPO}"
        settings.EVIDENCE_OCI_ALLOWED_REGISTRIES = [guarded]

        run = _publish(recipe)
        publication = run.oci_publication
        assert publication.state == PushState.FAILED
        assert "requires credentials to push" in publication.reason

        settings.RUN_EVIDENCE_OCI_USERNAME = "pusher"
        settings.RUN_EVIDENCE_OCI_PASSWORD = "wrong-" + secret
        push_run_evidence(run)
        publication.refresh_from_db()
        assert publication.state == PushState.FAILED
        assert "HTTP 401" in publication.reason
        assert "refused the credentials" in publication.reason

        password_file = tmp_path / "password"
        password_file.write_text(secret + "\n")
        settings.RUN_EVIDENCE_OCI_PASSWORD = ""
        settings.RUN_EVIDENCE_OCI_PASSWORD_FILE = str(password_file)
        push_run_evidence(run)
        publication.refresh_from_db()
        assert publication.state == PushState.PUSHED
        assert publication.oci_ref.startswith(f"{guarded}/{REPO}@sha256:")

    for row in RunOciPublication.objects.values():
        assert secret not in json.dumps(row, default=str)
    assert secret not in client.get(f"/api/v1/runs/{run.pk}/").content.decode()
    assert secret not in client.get(f"/runs/{run.pk}/").content.decode()


def test_a_simulated_run_is_never_pushed(push_to: str, recipe: Recipe) -> None:
    run = _publish(recipe, environment="simulated")

    publication = run.oci_publication
    assert publication.state == PushState.SKIPPED
    assert "simulated" in publication.reason
    assert publication.oci_ref == ""


def test_no_repository_configured_means_no_push_and_the_command_says_so(
    recipe: Recipe, settings: Any
) -> None:
    settings.RUN_EVIDENCE_OCI_REPOSITORY = ""

    run = _publish(recipe)

    assert not RunOciPublication.objects.filter(run=run).exists()
    with pytest.raises(CommandError, match="RUN_EVIDENCE_OCI_REPOSITORY is not set") as info:
        call_command("push_run_evidence")
    assert info.value.returncode == 2
