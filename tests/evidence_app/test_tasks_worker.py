"""A real Celery worker process (``celery -A aicr_site worker -Q ingest``) against Redis and the
test database pulls an OCI reference the web side enqueued after commit."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

from aicr_site.celery import app as celery_app
from evidence_app.models import Evidence, UploadLog, UploadState
from evidence_app.services import signers, trust_roots
from evidence_app.services.oci import oci_upload_request
from recipes_app.models import Catalog, Recipe
from tests.evidence_app.conftest import BUNDLE_MEDIA_TYPE
from tests.evidence_factories import (
    EXAMPLE_RECIPE,
    FIRST_PARTY_IDENTITY,
    GITHUB_ISSUER,
    statement_for,
)
from tests.sigstore_private import PrivateSigstore

pytestmark = pytest.mark.django_db(transaction=True)
REPO = Path(__file__).resolve().parents[2]
CELERY = Path(sys.executable).with_name("celery")
LOCAL_REDIS = ("127.0.0.1", 6379)


def _redis_url() -> str:
    url = os.environ.get("REDIS_URL") or settings.REDIS_URL
    if url:
        return url
    try:
        with socket.create_connection(LOCAL_REDIS, timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            if s.recv(16).startswith(b"+PONG"):
                return "redis://127.0.0.1:6379/15"
    except OSError:
        pass
    pytest.skip("no Redis: REDIS_URL is not set and nothing answers on 127.0.0.1:6379")


def _database_url() -> str:
    if connection.vendor != "postgresql":
        pytest.skip(
            "the worker is another process and SQLite's in-memory test database is not "
            "shared: run with DATABASE_URL=postgres://… (CI does)"
        )
    db = connection.settings_dict
    user = urllib.parse.quote(db.get("USER") or "")
    password = urllib.parse.quote(db.get("PASSWORD") or "")
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    return f"postgres://{auth}{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"


def _reset_connections() -> None:
    """Drop cached broker connections and producers (as Celery does after a fork, without
    sending its after-fork signal)."""
    celery_app._pool = None
    amqp = celery_app.__dict__.get("amqp")
    if amqp is not None:
        amqp._producer_pool = None


@pytest.fixture
def broker() -> Iterator[str]:
    """This process's Celery app sends to Redis (locally it would run tasks eagerly)."""
    url = _redis_url()
    conf = celery_app.conf
    saved = (conf.broker_url, conf.task_always_eager)
    conf.broker_url, conf.task_always_eager = url, False
    _reset_connections()
    yield url
    conf.broker_url, conf.task_always_eager = saved
    _reset_connections()


@pytest.fixture
def worker(broker: str, tmp_path: Path) -> Iterator[Path]:
    database_url = _database_url()
    log_path = tmp_path / "worker.log"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "aicr_site.settings",
        "DATABASE_URL": database_url,
        "DB_CONN_MAX_AGE": "0",
        "REDIS_URL": broker,
        "EVIDENCE_OCI_ENABLED": "1",
        "EVIDENCE_OCI_ALLOW_LOOPBACK_HTTP": "1",
        "EVIDENCE_OCI_TIMEOUT_SECONDS": "10",
    }
    command = [
        str(CELERY),
        "-A",
        "aicr_site",
        "worker",
        "-Q",
        "ingest",
        "-c",
        "1",
        "-P",
        "solo",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
        "-l",
        "INFO",
    ]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=log)
    try:
        yield log_path
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def test_it_pulls_and_verifies_an_oci_reference_on_a_real_worker(
    worker: Path,
    push: Callable[..., str],
    private_sigstore: PrivateSigstore,
    real_catalog: Catalog,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    settings.EVIDENCE_OCI_ENABLED = True
    trust_roots.production_root_ensure()
    signers.seeded_allowlist_ensure()
    trust_roots.trust_root_add(
        name="worker test instance", trusted_root_json=private_sigstore.trusted_root_json()
    )
    recipe = Recipe.objects.get(catalog=real_catalog, name=EXAMPLE_RECIPE)
    bundle = private_sigstore.sign_dsse(
        statement_for(recipe), identity=FIRST_PARTY_IDENTITY, issuer=GITHUB_ISSUER
    ).bundle
    ref = push(bundle, name="evidence.sigstore.json", media_type=BUNDLE_MEDIA_TYPE)

    log = oci_upload_request(oci_ref=ref, user=None)  # commits, then enqueues
    assert log.state == UploadState.PENDING

    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        log.refresh_from_db()
        if log.state == UploadState.DONE:
            break
        time.sleep(0.25)
    assert log.state == UploadState.DONE, worker.read_text()[-4000:]
    assert (log.verdict, log.outcome, log.attempts) == ("verified", "created", 1), log.reason
    evidence = Evidence.objects.get()
    assert (evidence.oci_ref, bytes(evidence.content)) == (ref, bundle)
    assert log.evidence == evidence
    assert UploadLog.objects.count() == 1
    assert "evidence_app.tasks.ingest_oci" in worker.read_text()


def test_a_real_worker_builds_an_export_the_web_side_serves(
    worker: Path, real_catalog: Catalog, django_user_model: Any
) -> None:
    """Asked on the web side (committed, then sent), built by the worker into the database,
    downloaded here: the same bytes as the streamed export of the same records."""
    from django.test import Client

    from evidence_app.models import ExportJob, ExportState
    from evidence_app.services.tokens import token_create, user_with_role
    from tests.evidence_factories import EvidenceFactory

    recipe = Recipe.objects.get(catalog=real_catalog, name=EXAMPLE_RECIPE)
    for _ in range(5):
        EvidenceFactory(recipe=recipe)
    token = token_create(user=user_with_role(username="audrey", role="auditor"), role="auditor")[1]
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    asked = client.post("/api/v1/exports/", {"format": "ndjson"}, content_type="application/json")
    assert asked.status_code == 202, asked.content
    job = ExportJob.objects.get(pk=asked.json()["id"])
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and job.state != ExportState.DONE:
        time.sleep(0.25)
        job.refresh_from_db()
    assert job.state == ExportState.DONE, (job.state, job.error, worker.read_text()[-4000:])
    assert job.done == 5
    download = client.get(asked.json()["url"] + "download/")
    assert download.status_code == 200
    streamed = client.get("/api/v1/export/evidence.ndjson")
    assert b"".join(download.streaming_content) == b"".join(streamed.streaming_content)
    assert "evidence_app.tasks.export_build" in worker.read_text()


def test_a_real_worker_verifies_a_bundle_sent_with_respond_async(
    worker: Path, private_sigstore: PrivateSigstore, real_catalog: Catalog
) -> None:
    """``Prefer: respond-async``: 202 from the web side, the bundle verified and stored by the
    worker process, the status URL then giving the outcome a direct upload would have had."""
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.test import Client

    from evidence_app.models import QueuedBundle
    from evidence_app.services.tokens import token_create, user_with_role

    trust_roots.trust_root_add(
        name="worker test instance", trusted_root_json=private_sigstore.trusted_root_json()
    )
    signers.seeded_allowlist_ensure()
    recipe = Recipe.objects.get(catalog=real_catalog, name=EXAMPLE_RECIPE)
    bundle = private_sigstore.sign_dsse(
        statement_for(recipe), identity=FIRST_PARTY_IDENTITY, issuer=GITHUB_ISSUER
    ).bundle
    token = token_create(
        user=user_with_role(username="carol", role="contributor"), role="contributor"
    )[1]
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    files = {"bundle": SimpleUploadedFile("e.sigstore.json", bundle, "application/json")}
    accepted = client.post("/api/v1/evidence/", files, HTTP_PREFER="respond-async")
    assert accepted.status_code == 202, accepted.content

    status_url = accepted.json()["status_url"]
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        status = client.get(status_url).json()
        if status["state"] == "done":
            break
        time.sleep(0.25)
    assert status["state"] == "done", worker.read_text()[-4000:]
    assert (status["http_status"], status["verdict"]) == (201, "verified"), status["reason"]
    assert bytes(Evidence.objects.get(pk=status["evidence_id"]).content) == bundle
    assert not QueuedBundle.objects.exists()
    assert "evidence_app.tasks.ingest_queued" in worker.read_text()
