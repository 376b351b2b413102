"""``POST /api/v1/evidence/`` with ``Prefer: respond-async``: 202 once the bytes are committed,
the status URL pending until a worker has the outcome, then the outcome a direct upload would
have had; the bytes kept until then and deleted after."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from evidence_app.api.views import prefers_async
from evidence_app.models import Evidence, QueuedBundle, TrustRoot, UploadLog, UploadState
from evidence_app.services.ingest import queued

Api = Callable[[str | None], Client]
ASYNC = {"HTTP_PREFER": "respond-async"}


@pytest.fixture
def client(api: Api, contributor: str, private_root: TrustRoot) -> Client:
    """A contributor's API client, the private Sigstore instance trusted."""
    return api(contributor)


def _worker_turn() -> None:
    """What the ``ingest_queued`` tasks do on a worker, here in-process (a task sent to the
    suite's Redis would wait there for a worker of some other test)."""
    for upload_id in UploadLog.objects.filter(state=UploadState.PENDING).values_list(
        "pk", flat=True
    ):
        queued.queued_upload_process(upload_id=upload_id)


def _upload(client: Client, data: bytes, **headers: str) -> Any:
    files = {"bundle": SimpleUploadedFile("e.sigstore.json", data, "application/json")}
    return client.post("/api/v1/evidence/", files, **headers)


def test_it_answers_202_then_the_worker_stores_it(
    client: Client, bundle: bytes, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False) as queued_tasks:
        response = _upload(client, bundle, **ASYNC)

    assert response.status_code == 202, response.content
    body = response.json()
    assert response["Location"] == body["status_url"]
    assert response["Preference-Applied"] == "respond-async"
    log = UploadLog.objects.get(pk=body["upload_id"])
    # Accepted is all that is true yet: nothing verified, nothing stored, the bytes kept.
    assert (body["state"], log.state, log.outcome) == ("pending", "pending", "")
    assert bytes(QueuedBundle.objects.get(upload=log).data) == bundle
    assert not Evidence.objects.exists()
    pending = client.get(body["status_url"]).json()
    assert (pending["state"], pending["http_status"], pending["evidence_id"]) == (
        "pending",
        None,
        None,
    )

    assert len(queued_tasks) == 1
    _worker_turn()

    evidence = Evidence.objects.get()
    done = client.get(body["status_url"]).json()
    assert (done["state"], done["http_status"], done["verdict"]) == ("done", 201, "verified")
    assert done["evidence_id"] == evidence.pk
    assert bytes(evidence.content) == bundle
    assert evidence.uploaded_by.username == "carol"
    assert not QueuedBundle.objects.exists()
    assert UploadLog.objects.count() == 1  # the queued row was completed, not a second written


def test_the_same_bytes_queued_again_end_as_already_stored(
    client: Client, bundle: bytes, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False):
        first = _upload(client, bundle, **ASYNC)
        _worker_turn()
        second = _upload(client, bundle, **ASYNC)
        _worker_turn()
    assert (first.status_code, second.status_code) == (202, 202)
    statuses = [client.get(r.json()["status_url"]).json()["http_status"] for r in (first, second)]
    assert statuses == [201, 200]
    assert Evidence.objects.count() == 1


def test_a_refused_bundle_ends_refused_with_its_reason_and_its_bytes_gone(
    client: Client, bundle: bytes, django_capture_on_commit_callbacks: Any
) -> None:
    tampered = bundle.replace(b'"payload": "', b'"payload": "AAAA')
    with django_capture_on_commit_callbacks(execute=False):
        response = _upload(client, tampered, **ASYNC)
    _worker_turn()
    done = client.get(response.json()["status_url"]).json()
    assert (done["http_status"], done["verdict"], done["failed_step"]) == (
        422,
        "invalid",
        "signature",
    )
    assert done["reason"]
    assert not Evidence.objects.exists()
    assert not QueuedBundle.objects.exists()


def test_an_oversized_bundle_is_refused_at_once_not_queued(
    api: Api, contributor: str, bundle: bytes, settings: Any
) -> None:
    settings.EVIDENCE_MAX_UPLOAD_BYTES = len(bundle) - 1
    response = _upload(api(contributor), bundle, **ASYNC)
    assert response.status_code == 413
    assert not QueuedBundle.objects.exists()


def test_without_the_preference_it_answers_in_the_request(client: Client, bundle: bytes) -> None:
    response = _upload(client, bundle, HTTP_PREFER="handling=strict")
    assert response.status_code == 201
    assert "Preference-Applied" not in response


@pytest.mark.parametrize(
    ("prefer", "wanted"),
    [
        ("respond-async", True),
        ("Respond-Async; foo=bar", True),
        ("handling=lenient, respond-async, wait=10", True),
        ("respond-async=1", True),
        ("", False),
        ("respond-asynchronously", False),
        ("wait=10", False),
        ("x" * 5000 + ", respond-async", False),  # past the 1,000 characters read
    ],
)
def test_it_reads_the_prefer_header_as_rfc_7240_writes_it(prefer: str, wanted: bool) -> None:
    assert prefers_async(prefer) is wanted


def test_a_redelivered_task_does_nothing_twice(
    contributor: str,
    private_root: TrustRoot,
    bundle: bytes,
    django_capture_on_commit_callbacks: Any,
) -> None:
    with django_capture_on_commit_callbacks(execute=False):
        log = queued.bundle_queue(data=bundle, artifact=None, filename="e.json", user=None)
    first = queued.queued_upload_process(upload_id=log.pk)
    again = queued.queued_upload_process(upload_id=log.pk)
    assert first is not None
    assert again is not None
    assert (first.outcome, again.outcome, again.attempts) == ("created", "created", 1)
    assert Evidence.objects.count() == 1


def test_a_busy_database_leaves_it_pending_with_its_bytes_for_a_retry(
    contributor: str,
    bundle: bytes,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    with django_capture_on_commit_callbacks(execute=False):
        log = queued.bundle_queue(data=bundle, artifact=None, filename="e.json", user=None)
    busy = SimpleNamespace(unavailable=True, retry_after=7)
    monkeypatch.setattr(queued, "evidence_ingest", lambda **_: busy)

    with pytest.raises(queued.Busy) as raised:
        queued.queued_upload_process(upload_id=log.pk)

    assert raised.value.retry_in == 7
    log.refresh_from_db()
    assert (log.state, log.outcome, log.claimed_at) == (UploadState.PENDING, "", None)
    assert QueuedBundle.objects.filter(upload=log).exists()


def test_a_busy_database_never_shows_the_queued_upload_as_finished(
    transactional_db: None, bundle: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real ingest meeting a database error (outside any transaction, as on a worker):
    the row goes from running back to pending, and is never saved as done (``busy``) between,
    which a status URL read at that moment would have shown."""
    from django.db import OperationalError
    from django.db.models.signals import post_save

    from evidence_app import tasks
    from evidence_app.services.ingest import service

    monkeypatch.setattr(tasks.ingest_queued, "delay", lambda upload_id: None)
    log = queued.bundle_queue(data=bundle, artifact=None, filename="e.json", user=None)

    def lock_timeout(*args: Any, **kwargs: Any) -> Any:
        raise OperationalError("canceling statement due to lock timeout")

    monkeypatch.setattr(service, "_ingest", lock_timeout)
    saved: list[tuple[str, str]] = []

    def record(sender: Any, instance: UploadLog, **kwargs: Any) -> None:
        if instance.pk == log.pk:
            saved.append((instance.state, instance.outcome))

    post_save.connect(record, sender=UploadLog)
    try:
        with pytest.raises(queued.Busy):
            queued.queued_upload_process(upload_id=log.pk)
    finally:
        post_save.disconnect(record, sender=UploadLog)

    assert all(state != UploadState.DONE for state, _ in saved), saved
    log.refresh_from_db()
    assert (log.state, log.outcome, log.claimed_at, log.attempts) == (
        UploadState.PENDING,
        "",
        None,
        1,
    )
    assert QueuedBundle.objects.filter(upload=log).exists()
