"""Exports built by a worker (``/api/v1/exports/``, ``/exports/``): who may, what is refused and
why, the same bytes as the streamed exports, progress, redelivery, expiry, and the pages.

The build runs here by calling the task's body (``export_job_build``) where a worker would;
tests/evidence_app/test_tasks_worker.py runs it on a real worker over Redis."""

from __future__ import annotations

import hashlib
import json
import tarfile
from collections.abc import Callable
from datetime import timedelta
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from evidence_app.exports import jobs
from evidence_app.exports.audit import audit_verify
from evidence_app.models import Evidence, ExportChunk, ExportJob, ExportState
from evidence_app.services.tokens import user_with_role
from recipes_app.models import Recipe
from tests.evidence_factories import EvidenceFactory

Api = Callable[[str | None], Client]
EXPORTS = "/api/v1/exports/"


@pytest.fixture
def auditor(make_token: Callable[..., str]) -> str:
    return make_token("audrey", "auditor")


@pytest.fixture
def rows(example_recipe: Recipe) -> list[Evidence]:
    now = timezone.now()
    return [
        EvidenceFactory(recipe=example_recipe, attested_at=now - timedelta(hours=n))
        for n in range(7)
    ]


@pytest.fixture
def site_key(settings: Any) -> ec.EllipticCurvePrivateKey:
    key = ec.generate_private_key(ec.SECP256R1())
    settings.SITE_SIGNING_KEY = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    return key


def _ask(api: Api, token: str | None, body: Any) -> Any:
    return api(token).post(EXPORTS, data=json.dumps(body), content_type="application/json")


def _built(api: Api, token: str, body: dict[str, Any]) -> dict[str, Any]:
    asked = _ask(api, token, body)
    assert asked.status_code == 202, asked.content
    assert jobs.export_job_build(asked.json()["id"]) == ExportState.DONE
    status = api(token).get(asked["Location"])
    assert status.status_code == 200
    return status.json()


def _download(api: Api, token: str, job: dict[str, Any]) -> bytes:
    response = api(token).get(job["download_url"])
    assert response.status_code == 200, response.content
    body = b"".join(response.streaming_content)
    assert int(response["Content-Length"]) == len(body) == job["size"]
    assert response["ETag"] == f'"{job["sha256"]}"'
    assert f'filename="{job["filename"]}"' in response["Content-Disposition"]
    return body


@pytest.mark.parametrize(
    ("role", "status"),
    [(None, 401), ("contributor", 403), ("auditor", 202), ("maintainer", 202)],
)
def test_only_auditors_and_maintainers_may_ask(
    api: Api, make_token: Callable[..., str], role: str | None, status: int
) -> None:
    token = make_token(f"user-{role}", role) if role else None
    assert _ask(api, token, {"format": "ndjson"}).status_code == status
    assert ExportJob.objects.count() == (1 if status == 202 else 0)


@pytest.mark.parametrize(
    ("filters", "path"),
    [({}, "export/evidence.ndjson"), ({"verdict": "verified", "counted": "true"}, None)],
)
@pytest.mark.parametrize("format", ["ndjson", "csv"])
def test_the_file_is_the_streamed_export_of_the_same_filters(
    api: Api,
    auditor: str,
    rows: list[Evidence],
    settings: Any,
    format: str,
    filters: dict[str, str],
    path: str | None,
) -> None:
    settings.EXPORT_CHUNK_BYTES = 512  # several chunks, split anywhere
    job = _built(api, auditor, {"format": format, "filters": filters})
    body = _download(api, auditor, job)
    streamed = api(auditor).get(f"/api/v1/export/evidence.{format}", filters)
    assert body == b"".join(streamed.streaming_content)
    assert hashlib.sha256(body).hexdigest() == job["sha256"]
    assert ExportChunk.objects.filter(job_id=job["id"]).count() == -(-len(body) // 512)
    assert (job["done"], job["total"]) == (len(rows), len(rows))
    assert job["filename"].startswith("evidence-")
    assert job["filename"].endswith(f".{format}")


def test_an_audit_package_is_built_signed_and_verifies_offline(
    api: Api,
    auditor: str,
    rows: list[Evidence],
    site_key: ec.EllipticCurvePrivateKey,
    tmp_path: Path,
    django_db_blocker: Any,
) -> None:
    job = _built(api, auditor, {"format": "audit", "filters": {"recipe": rows[0].recipe_name}})
    body = _download(api, auditor, job)
    path = tmp_path / job["filename"]
    path.write_bytes(body)
    with tarfile.open(fileobj=BytesIO(body), mode="r:gz") as tar:
        package = json.loads(tar.extractfile("package.json").read())  # type: ignore[union-attr]
    assert package["filters"] == {"recipe": rows[0].recipe_name}
    assert package["records"] == len(rows) == job["done"]
    with django_db_blocker.block():
        report = audit_verify(path, pinned_key=site_key.public_key())
    assert report.records == len(rows)
    # The manifest's signature and every file's digest hold; the factory's rows carry
    # placeholder bytes, not Sigstore bundles (test_audit_package.py verifies real ones).
    assert {p.code for p in report.problems} == {"bundle-not-verified"}


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"format": "xlsx"}, "format", "format must be one of ndjson, csv, audit"),
        ({"format": "csv", "filters": {"recipie": "x"}}, "filters.recipie", "unknown filter"),
        ({"format": "csv", "filters": {"verdict": "great"}}, "filters.verdict", "verdict"),
        ({"format": "csv", "filters": {"stale": "maybe"}}, "filters.stale", "stale"),
        ({"format": "csv", "filters": ["recipe"]}, "filters", "must be an object"),
        ({"format": "csv", "filters": {"recipe": {"a": 1}}}, "filters.recipe", "must be text"),
        ({"format": "csv", "filters": {"recipe": "x" * 501}}, "filters.recipe", "at most 500"),
        (["format"], None, "must be a JSON object"),
    ],
)
def test_a_bad_request_is_a_400_naming_what_is_wrong_and_stores_nothing(
    api: Api, auditor: str, body: Any, field: str | None, words: str
) -> None:
    response = _ask(api, auditor, body)
    assert response.status_code == 400, response.content
    assert words in response.json()["detail"]
    assert response.json().get("field") == field
    assert not ExportJob.objects.exists()


def test_an_audit_package_without_a_site_key_is_refused_up_front(
    api: Api, auditor: str, settings: Any
) -> None:
    settings.SITE_SIGNING_KEY = ""
    settings.SITE_SIGNING_LOCAL_KEY_FILE = None
    response = _ask(api, auditor, {"format": "audit"})
    assert response.status_code == 503, response.content
    assert response.json()["detail"].startswith("No audit package:")
    assert not ExportJob.objects.exists()


def test_a_user_has_at_most_the_configured_exports_in_flight(
    api: Api, auditor: str, settings: Any
) -> None:
    settings.EXPORT_ACTIVE_PER_USER = 2
    assert [_ask(api, auditor, {"format": "csv"}).status_code for _ in range(3)] == [202, 202, 429]
    refused = _ask(api, auditor, {"format": "csv"}).json()
    assert "you have 2 exports queued or building" in refused["detail"]
    first = ExportJob.objects.order_by("pk").first()
    assert first is not None
    jobs.export_job_build(first.pk)
    assert _ask(api, auditor, {"format": "csv"}).status_code == 202


def test_an_export_is_its_owners_alone(
    api: Api, auditor: str, make_token: Callable[..., str]
) -> None:
    job = _ask(api, auditor, {"format": "ndjson"}).json()
    other = make_token("otto", "auditor")
    assert api(other).get(job["url"]).status_code == 404
    assert api(other).get(f"{job['url']}download/").status_code == 404
    assert api(other).get(EXPORTS).json()["results"] == []
    assert [j["id"] for j in api(auditor).get(EXPORTS).json()["results"]] == [job["id"]]


def test_nothing_is_downloadable_before_the_job_is_done(api: Api, auditor: str) -> None:
    job = _ask(api, auditor, {"format": "ndjson"}).json()
    assert job["state"] == "queued"
    assert job["download_url"] is None
    response = api(auditor).get(f"{job['url']}download/")
    assert response.status_code == 409
    assert "is queued, not ready" in response.json()["detail"]


def test_progress_is_written_as_the_build_goes(
    api: Api, auditor: str, rows: list[Evidence], settings: Any, monkeypatch: Any
) -> None:
    settings.EXPORT_CHUNK_BYTES = 256
    monkeypatch.setattr(jobs, "PROGRESS_EVERY_SECONDS", 0)
    seen: list[tuple[str, int, int | None]] = []
    store = jobs.ChunkWriter._store

    def watch(self: jobs.ChunkWriter, body: bytes) -> None:
        store(self, body)
        job = ExportJob.objects.get(pk=self.job_id)
        seen.append((job.state, job.done, job.total))

    monkeypatch.setattr(jobs.ChunkWriter, "_store", watch)
    job = _built(api, auditor, {"format": "csv"})
    assert {state for state, _, _ in seen} == {"running"}  # never "done" before the last chunk
    assert {total for _, _, total in seen} == {len(rows)}
    done = [d for _, d, _ in seen]
    assert done == sorted(done)
    assert 0 < done[-1] <= len(rows)
    assert len(set(done)) > 1
    assert job["state"] == "done"
    assert job["done"] == len(rows)


def test_a_redelivered_build_starts_again_and_gives_up_after_its_attempts(
    api: Api, auditor: str, rows: list[Evidence]
) -> None:
    job = ExportJob.objects.get(pk=_ask(api, auditor, {"format": "ndjson"}).json()["id"])
    # A worker died mid-build: the job is running, with a stale partial chunk.
    ExportJob.objects.filter(pk=job.pk).update(state=ExportState.RUNNING, attempts=1, done=3)
    ExportChunk.objects.create(job=job, seq=0, body=b"partial")
    assert jobs.export_job_build(job.pk) == ExportState.DONE
    job.refresh_from_db()
    assert (job.attempts, job.done) == (2, len(rows))
    assert b"partial" not in b"".join(jobs.export_job_body(job))
    assert jobs.export_job_build(job.pk) == ExportState.DONE  # done: left alone
    job.refresh_from_db()
    assert job.attempts == 2

    again = ExportJob.objects.get(pk=_ask(api, auditor, {"format": "ndjson"}).json()["id"])
    ExportJob.objects.filter(pk=again.pk).update(
        state=ExportState.RUNNING, attempts=jobs.MAX_ATTEMPTS
    )
    assert jobs.export_job_build(again.pk) == ExportState.FAILED
    again.refresh_from_db()
    assert again.state == ExportState.FAILED
    assert f"interrupted {jobs.MAX_ATTEMPTS} times" in again.error


def test_a_failed_build_says_why_and_keeps_no_partial_file(
    api: Api, auditor: str, rows: list[Evidence], monkeypatch: Any, settings: Any
) -> None:
    settings.EXPORT_CHUNK_BYTES = 64
    job_id = _ask(api, auditor, {"format": "ndjson"}).json()["id"]

    def broken(*args: Any, **kwargs: Any) -> Any:
        yield b"x" * 200  # some chunks stored, then the database goes away
        raise ConnectionError("gone")

    monkeypatch.setattr(jobs, "ndjson_stream_pg", broken)
    monkeypatch.setattr(jobs, "ndjson_stream", broken)
    assert jobs.export_job_build(job_id) == ExportState.FAILED
    job = ExportJob.objects.get(pk=job_id)
    assert job.error == "the build failed (ConnectionError); start the export again"
    assert not ExportChunk.objects.filter(job=job).exists()
    assert api(auditor).get(f"/api/v1/exports/{job_id}/download/").status_code == 409


def test_beat_expires_old_files_fails_stalled_builds_and_resends_lost_ones(
    api: Api, auditor: str, settings: Any, monkeypatch: Any
) -> None:
    settings.EXPORT_KEEP_HOURS, settings.EXPORT_STALLED_SECONDS = 24, 600
    sent: list[int] = []
    monkeypatch.setattr(jobs, "_send_build", sent.append)
    user = User.objects.get(username="audrey")
    now = timezone.now()
    old = ExportJob.objects.create(
        format="csv", site="http://t/", requested_by=user, state=ExportState.DONE
    )
    ExportChunk.objects.create(job=old, seq=0, body=b"a")
    ExportJob.objects.filter(pk=old.pk).update(finished_at=now - timedelta(hours=25))
    fresh = ExportJob.objects.create(
        format="csv", site="http://t/", requested_by=user, state=ExportState.DONE
    )
    ExportJob.objects.filter(pk=fresh.pk).update(finished_at=now - timedelta(hours=1))
    stalled = ExportJob.objects.create(
        format="csv", site="http://t/", requested_by=user, state=ExportState.RUNNING
    )
    ExportJob.objects.filter(pk=stalled.pk).update(progress_at=now - timedelta(minutes=11))
    lost = ExportJob.objects.create(format="csv", site="http://t/", requested_by=user)
    ExportJob.objects.filter(pk=lost.pk).update(created_at=now - timedelta(minutes=11))
    waiting = ExportJob.objects.create(format="csv", site="http://t/", requested_by=user)

    assert jobs.exports_expire() == 3
    assert not ExportJob.objects.filter(pk=old.pk).exists()
    assert not ExportChunk.objects.filter(job_id=old.pk).exists()
    stalled.refresh_from_db()
    assert stalled.state == ExportState.FAILED
    assert "no progress for 10 minutes (its worker stopped)" in stalled.error
    assert sent == [lost.pk]
    assert ExportJob.objects.filter(pk__in=[fresh.pk, waiting.pk]).count() == 2


def test_the_request_is_sent_to_a_worker_only_after_it_is_committed(
    api: Api, auditor: str, monkeypatch: Any, django_capture_on_commit_callbacks: Any
) -> None:
    sent: list[int] = []
    monkeypatch.setattr(jobs, "_send_build", sent.append)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        job = _ask(api, auditor, {"format": "csv"}).json()
        assert sent == []
    assert len(callbacks) == 1
    callbacks[0]()
    assert sent == [job["id"]]


# --- the pages --------------------------------------------------------------------------------


@pytest.fixture
def auditor_client(evidence_db: None) -> Client:
    client = Client()
    client.force_login(user_with_role(username="paula", role="auditor"))
    return client


def test_the_page_builds_the_export_of_the_list_filters_and_follows_it(
    auditor_client: Client, rows: list[Evidence], monkeypatch: Any
) -> None:
    monkeypatch.setattr(jobs, "_send_build", lambda job_id: None)
    recipe = rows[0].recipe_name
    listing = auditor_client.get("/evidence/", {"recipe": recipe})
    assert f'href="/exports/?recipe={recipe}" data-export-link' in listing.content.decode()
    form = auditor_client.get("/exports/", {"recipe": recipe})
    assert form.status_code == 200
    assert f"<code>recipe={recipe}</code>" in form.content.decode()
    made = auditor_client.post("/exports/", {"recipe": recipe, "format": "csv"})
    assert made.status_code == 303
    job = ExportJob.objects.get()
    assert made["Location"] == f"/exports/{job.pk}/"
    assert (job.format, job.filters) == ("csv", {"recipe": recipe})

    queued = auditor_client.get(made["Location"])
    assert "Queued: waiting for a worker." in queued.content.decode()
    assert 'hx-trigger="every 1s"' in queued.content.decode()
    assert auditor_client.get(f"/exports/{job.pk}/download").status_code == 409

    jobs.export_job_build(job.pk)
    poll = auditor_client.get(
        made["Location"], HTTP_HX_REQUEST="true", HTTP_HX_TARGET="export-live"
    )
    assert poll["HX-Refresh"] == "true"
    done = auditor_client.get(made["Location"]).content.decode()
    assert "Ready to download" in done
    assert "hx-trigger" not in done
    job.refresh_from_db()
    assert job.sha256 in done
    download = auditor_client.get(f"/exports/{job.pk}/download")
    assert download.status_code == 200
    assert hashlib.sha256(b"".join(download.streaming_content)).hexdigest() == job.sha256


def test_the_page_refuses_a_bad_filter_by_name(auditor_client: Client) -> None:
    response = auditor_client.get("/exports/", {"verdict": "great"})
    assert response.status_code == 400
    assert "verdict" in response.content.decode()
    posted = auditor_client.post("/exports/", {"nonsense": "1", "format": "csv"})
    assert posted.status_code == 400
    assert "unknown filter &#x27;nonsense&#x27;" in posted.content.decode()
    assert not ExportJob.objects.exists()


def test_the_pages_are_for_auditors_and_maintainers_and_owners(
    auditor_client: Client, evidence_db: None
) -> None:
    assert Client().get("/exports/").status_code == 302  # sign in
    contributor = Client()
    contributor.force_login(user_with_role(username="carl", role="contributor"))
    assert contributor.get("/exports/").status_code == 403
    listing = contributor.get("/evidence/")
    assert "data-export-link" not in listing.content.decode()
    owner = User.objects.get(username="paula")
    job = ExportJob.objects.create(format="csv", site="http://t/", requested_by=owner)
    other = Client()
    other.force_login(user_with_role(username="oscar", role="auditor"))
    assert other.get(f"/exports/{job.pk}/").status_code == 404
    assert other.get(f"/exports/{job.pk}/download").status_code == 404
    assert auditor_client.get(f"/exports/{job.pk}/").status_code == 200
