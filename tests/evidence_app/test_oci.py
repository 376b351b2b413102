"""Evidence by OCI reference against a real registry: Debian's ``docker-registry`` on a loopback
port, artifacts pushed with the ``oras`` client the way ``oras push`` does."""

from __future__ import annotations

import contextlib
import json
import socket
import urllib.request
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from aicr_site.celery import app as celery_app
from aicr_site.lib import outbound
from evidence_app.models import Evidence, TrustRoot, UploadLog, UploadState
from evidence_app.services import oci
from evidence_app.services.ingest.queued import LeaseHeld
from evidence_app.services.oci import (
    OciError,
    oci_upload_process,
    oci_upload_request,
    parse_oci_ref,
)
from recipes_app.models import Recipe
from tests.evidence_app.conftest import BUNDLE_MEDIA_TYPE
from tests.evidence_factories import (
    FIRST_PARTY_IDENTITY,
    GITHUB_ISSUER,
    example_statement,
    signed_example_tarball,
    statement_for,
)
from tests.oci_registry import free_port
from tests.sigstore_private import PrivateSigstore

DIGEST = "sha256:" + "ab" * 32


@pytest.fixture
def oci_on(settings: Any) -> Iterator[None]:
    settings.EVIDENCE_OCI_ENABLED = True
    settings.EVIDENCE_OCI_ALLOW_LOOPBACK_HTTP = True
    settings.EVIDENCE_OCI_TIMEOUT_SECONDS = 5
    # Tasks run in this process here (CI's REDIS_URL would otherwise send them to a broker;
    # test_tasks_worker.py covers the real worker).
    eager = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = eager


@pytest.fixture
def bundle(
    private_root: TrustRoot, private_sigstore: PrivateSigstore, example_recipe: Recipe
) -> bytes:
    return private_sigstore.sign_dsse(
        statement_for(example_recipe), identity=FIRST_PARTY_IDENTITY, issuer=GITHUB_ISSUER
    ).bundle


def _request(ref: str, django_capture_on_commit_callbacks: Any) -> UploadLog:
    with django_capture_on_commit_callbacks(execute=True):
        log = oci_upload_request(oci_ref=ref, user=None)
    log.refresh_from_db()
    return log


# --- references ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ghcr.io/org/aicr-evidence:h100-eks", "pin it by digest"),
        ("ghcr.io/org/aicr-evidence", "has no digest"),
        ("org/aicr-evidence@" + DIGEST, "is not a registry host"),
        ("ghcr.io/org/aicr-evidence@sha256:abc", "64 lowercase hex"),
        ("ghcr.io/org/aicr-evidence@sha512:" + "ab" * 64, "64 lowercase hex"),
        ("ghcr.io/Org/Evidence@" + DIGEST, "not a valid repository name"),
        ("ghcr.io/org/../x@" + DIGEST, "not a valid repository name"),
        ("", "empty"),
        ("ghcr.io/" + "a" * 600 + "@" + DIGEST, "longer than"),
    ],
)
def test_it_refuses_references_not_pinned_by_digest(text: str, message: str) -> None:
    with pytest.raises(OciError, match=message):
        parse_oci_ref(text)


def test_it_parses_pinned_references() -> None:
    ref = parse_oci_ref(f"oci://ghcr.io/org/team/aicr-evidence:run-1@{DIGEST}")
    assert (ref.registry, ref.repository, ref.digest, ref.tag) == (
        "ghcr.io",
        "org/team/aicr-evidence",
        DIGEST,
        "run-1",
    )
    assert ref.pinned == f"ghcr.io/org/team/aicr-evidence@{DIGEST}"
    assert parse_oci_ref(f"127.0.0.1:5000/e@{DIGEST}").port == 5000
    assert parse_oci_ref(f"[::1]:5000/e@{DIGEST}").host == "::1"


def test_it_refuses_a_tag_at_once_without_contacting_anything(
    oci_on: None, evidence_db: None, django_capture_on_commit_callbacks: Any
) -> None:
    log = _request("127.0.0.1:9/aicr-evidence:latest", django_capture_on_commit_callbacks)

    assert (log.state, log.verdict, log.failed_step, log.outcome) == (
        "done",
        "rejected",
        "parse",
        "refused",
    )
    assert "pin it by digest" in log.reason
    assert log.attempts == 0


def test_it_refuses_references_when_oci_pulls_are_off(
    settings: Any, evidence_db: None, django_capture_on_commit_callbacks: Any
) -> None:
    settings.EVIDENCE_OCI_ENABLED = False

    log = _request(f"ghcr.io/org/e@{DIGEST}", django_capture_on_commit_callbacks)

    assert log.verdict == "rejected"
    assert "only on an ingest worker" in log.reason


def test_it_only_pulls_from_listed_registries_when_a_list_is_set(
    oci_on: None, settings: Any, evidence_db: None, django_capture_on_commit_callbacks: Any
) -> None:
    settings.EVIDENCE_OCI_ALLOWED_REGISTRIES = ["ghcr.io"]

    log = _request(f"127.0.0.1:9/e@{DIGEST}", django_capture_on_commit_callbacks)

    assert "not one this site pulls from" in log.reason


# --- pulls --------------------------------------------------------------------------------


def test_it_pulls_verifies_and_stores_a_bundle_by_digest(
    oci_on: None, push: Callable[..., str], bundle: bytes, django_capture_on_commit_callbacks: Any
) -> None:
    ref = push(bundle, name="evidence.sigstore.json", media_type=BUNDLE_MEDIA_TYPE)

    log = _request(ref, django_capture_on_commit_callbacks)

    assert (log.state, log.verdict, log.outcome, log.attempts) == ("done", "verified", "created", 1)
    evidence = Evidence.objects.get()
    assert log.evidence == evidence
    assert bytes(evidence.content) == bundle
    assert (evidence.container, evidence.oci_ref) == ("oci", ref)
    assert evidence.signer.signer_class == "first-party"
    assert log.filename == "evidence.sigstore.json"
    assert [s["step"] for s in log.transcript][-1] == "classify"
    # idempotent: a re-delivered task leaves the finished upload alone
    assert oci_upload_process(upload_id=log.pk).attempts == 1


def test_it_pulls_an_evidence_directory_pushed_as_a_tarball(
    oci_on: None,
    push: Callable[..., str],
    private_root: TrustRoot,
    private_sigstore: PrivateSigstore,
    example_recipe: Recipe,
    django_capture_on_commit_callbacks: Any,
) -> None:
    signed = private_sigstore.sign_dsse(
        example_statement(), identity=FIRST_PARTY_IDENTITY, issuer=GITHUB_ISSUER
    )
    data = signed_example_tarball(signed.bundle)
    ref = push(
        data, name="summary-bundle.tar.gz", media_type="application/vnd.oci.image.layer.v1.tar+gzip"
    )

    log = _request(ref, django_capture_on_commit_callbacks)

    assert log.verdict == "verified", log.reason
    assert set(log.evidence.check_results) == {"conformance", "deployment", "performance"}


def test_a_digest_the_registry_does_not_have_fails_clearly(
    oci_on: None,
    push: Callable[..., str],
    bundle: bytes,
    registry: str,
    django_capture_on_commit_callbacks: Any,
) -> None:
    push(bundle, name="evidence.sigstore.json", media_type=BUNDLE_MEDIA_TYPE)

    log = _request(f"{registry}/aicr-evidence@{DIGEST}", django_capture_on_commit_callbacks)

    assert (log.state, log.verdict, log.failed_step) == ("done", "rejected", "parse")
    assert f"manifest {DIGEST} not found" in log.reason
    assert "HTTP 404" in log.reason
    assert not Evidence.objects.exists()


def test_an_unreachable_registry_fails_clearly(
    oci_on: None, evidence_db: None, django_capture_on_commit_callbacks: Any
) -> None:
    port = free_port()  # nothing listens there

    log = _request(f"127.0.0.1:{port}/aicr-evidence@{DIGEST}", django_capture_on_commit_callbacks)

    assert (log.state, log.verdict) == ("done", "rejected")
    assert log.reason.startswith("OCI pull failed: registry 127.0.0.1:")
    assert "unreachable" in log.reason


def test_it_never_uses_plain_http_or_private_addresses_unless_allowed(
    oci_on: None,
    settings: Any,
    push: Callable[..., str],
    bundle: bytes,
    django_capture_on_commit_callbacks: Any,
) -> None:
    ref = push(bundle, name="evidence.sigstore.json", media_type=BUNDLE_MEDIA_TYPE)
    settings.EVIDENCE_OCI_ALLOW_LOOPBACK_HTTP = False

    loopback = _request(ref, django_capture_on_commit_callbacks)
    private = _request(f"10.1.2.3:5000/e@{DIGEST}", django_capture_on_commit_callbacks)

    assert "loopback" in loopback.reason
    assert "non-public address" in private.reason
    assert not Evidence.objects.exists()


def test_it_refuses_an_index_and_picks_the_bundle_among_layers(
    oci_on: None,
    push: Callable[..., str],
    registry: str,
    bundle: bytes,
    django_capture_on_commit_callbacks: Any,
) -> None:
    ref = push(bundle, name="evidence.sigstore.json", media_type=BUNDLE_MEDIA_TYPE)
    digest = ref.rsplit("@", 1)[1]
    index = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "digest": digest,
                    "size": 1,
                }
            ],
        }
    ).encode()
    request = urllib.request.Request(
        f"http://{registry}/v2/aicr-evidence/manifests/index",
        data=index,
        method="PUT",
        headers={"Content-Type": "application/vnd.oci.image.index.v1+json"},
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        index_digest = response.headers["Docker-Content-Digest"]

    log = _request(f"{registry}/aicr-evidence@{index_digest}", django_capture_on_commit_callbacks)

    assert "image index" in log.reason


def test_the_api_answers_202_then_the_status_url_gives_the_result(
    oci_on: None,
    push: Callable[..., str],
    bundle: bytes,
    api: Any,
    make_token: Callable[..., str],
    django_capture_on_commit_callbacks: Any,
) -> None:
    ref = push(bundle, name="evidence.sigstore.json", media_type=BUNDLE_MEDIA_TYPE)
    token = make_token("carol", "contributor")
    client = api(token)

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            "/api/v1/evidence/", {"oci_ref": ref}, content_type="application/json"
        )

    assert response.status_code == 202
    body = response.json()
    assert body["status_url"] == f"http://testserver/api/v1/uploads/{body['upload_id']}/"
    assert response["Location"] == body["status_url"]
    status = client.get(body["status_url"]).json()
    assert (status["state"], status["verdict"], status["http_status"]) == ("done", "verified", 201)
    assert status["evidence_url"] == f"http://testserver/api/v1/evidence/{status['evidence_id']}/"
    assert api(make_token("mallory", "contributor")).get(body["status_url"]).status_code == 403
    assert api(make_token("audrey", "auditor")).get(body["status_url"]).status_code == 200
    assert api(None).get(body["status_url"]).status_code == 401
    tag = client.post(
        "/api/v1/evidence/", {"oci_ref": ref.split("@")[0] + ":t"}, content_type="application/json"
    )
    assert tag.status_code == 422
    assert "pin it by digest" in tag.json()["reason"]


# --- DNS rebinding, leases -------------------------------------------------------------------


def test_a_name_rebound_to_loopback_after_the_check_cannot_reach_it(
    oci_on: None,
    evidence_db: None,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """The check sees a public address; a second lookup would say 127.0.0.1. The connection
    goes to the checked address, so the loopback listener is never contacted."""
    settings.EVIDENCE_OCI_ALLOW_LOOPBACK_HTTP = False
    settings.EVIDENCE_OCI_TIMEOUT_SECONDS = 1
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    real = socket.getaddrinfo
    answers = iter(["93.184.216.34"])  # public at check time, then loopback

    def rebinding(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host != "rebind.example":
            return real(host, *args, **kwargs)
        address = next(answers, "127.0.0.1")
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, port))]

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    connected: list[Any] = []
    seen: list[tuple[Any, ...]] = []
    real_connect = outbound.connect

    def spy(address: Any, *args: Any) -> Any:
        seen.append(address.sockaddr)
        return real_connect(address, *args)

    monkeypatch.setattr(outbound, "connect", spy)
    try:
        log = _request(f"rebind.example:{port}/e@{DIGEST}", django_capture_on_commit_callbacks)
        with contextlib.suppress(TimeoutError):
            connected.append(listener.accept())
    finally:
        for conn, _ in connected:
            conn.close()
        listener.close()

    assert connected == []  # loopback was never reached
    assert seen == [("93.184.216.34", port)]
    assert (log.state, log.verdict) == ("done", "rejected")
    assert "unreachable" in log.reason


def test_a_redelivered_task_does_not_run_alongside_a_live_claim(
    oci_on: None, evidence_db: None, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.EVIDENCE_OCI_LEASE_SECONDS = 600
    pulls: list[str] = []
    monkeypatch.setattr(oci, "oci_pull", lambda ref: pulls.append(ref.pinned) or _no_pull())
    log = UploadLog.objects.create(
        channel="oci",
        oci_ref=f"ghcr.io/org/e@{DIGEST}",
        state=UploadState.RUNNING,
        attempts=1,
        claimed_at=timezone.now() - timedelta(seconds=30),
    )

    with pytest.raises(LeaseHeld) as held:
        oci_upload_process(upload_id=log.pk)
    assert 500 < held.value.retry_in <= 570
    assert pulls == []
    log.refresh_from_db()
    assert (log.state, log.attempts) == ("running", 1)

    # The lease ran out: the original is presumed dead and the row is taken over.
    UploadLog.objects.filter(pk=log.pk).update(claimed_at=timezone.now() - timedelta(hours=1))
    done = oci_upload_process(upload_id=log.pk)
    assert done is not None
    assert pulls == [f"ghcr.io/org/e@{DIGEST}"]
    assert (done.state, done.attempts) == ("done", 2)


def _no_pull() -> Any:
    raise OciError("registry ghcr.io is unreachable (test); try again later")
