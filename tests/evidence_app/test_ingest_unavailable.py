"""A database write that still fails during ingest (SQLite "database is locked", a PostgreSQL
lock timeout) is a clean 503 with ``Retry-After`` and an upload-log row — never a 500.

The contention is real: a second connection holds a write lock on the tables ingest writes
(PostgreSQL: ``LOCK TABLE … IN EXCLUSIVE MODE`` with a short ``lock_timeout`` on the site's
connection; SQLite: a write transaction on the shared-cache test database, which makes the
site's writes fail with "database table is locked")."""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test import Client

from evidence_app.models import Evidence, UploadLog, UploadOutcome
from evidence_app.services import ingest as ingest_module
from evidence_app.services import signers, trust_roots
from evidence_app.services.ingest import service as ingest_service
from evidence_app.services.ingest import upload_log as ingest_upload_log
from evidence_app.services.tokens import token_create, user_with_role
from recipes_app.models import Catalog, Recipe
from tests.evidence_factories import (
    EXAMPLE_RECIPE,
    FIRST_PARTY_IDENTITY,
    GITHUB_ISSUER,
    statement_for,
)
from tests.sigstore_private import PrivateSigstore

pytestmark = pytest.mark.django_db(transaction=True)


@contextlib.contextmanager
def tables_locked(*models: Any) -> Iterator[None]:
    """Another connection holds a write lock on ``models``' tables until the block ends."""
    tables = [m._meta.db_table for m in models]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '200ms'")
        params = connection.get_connection_params()
        params.pop("cursor_factory", None)
        params.pop("context", None)
        other = psycopg.connect(**params)
        try:
            other.execute(f"LOCK TABLE {', '.join(tables)} IN EXCLUSIVE MODE")
            yield
        finally:
            other.rollback()
            other.close()
            with connection.cursor() as cursor:
                cursor.execute("SET lock_timeout = 0")
        return
    other = sqlite3.connect(connection.settings_dict["NAME"], uri=True, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        for table in tables:
            other.execute(f"DELETE FROM {table} WHERE 0")  # noqa: S608 (model table names)
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()


@pytest.fixture
def bundle(private_sigstore: PrivateSigstore, real_catalog: Catalog) -> bytes:
    trust_roots.production_root_ensure()
    signers.seeded_allowlist_ensure()
    trust_roots.trust_root_add(
        name="tests private instance", trusted_root_json=private_sigstore.trusted_root_json()
    )
    recipe = Recipe.objects.get(catalog=real_catalog, name=EXAMPLE_RECIPE)
    statement = statement_for(recipe, attested_at=datetime.now(UTC) - timedelta(hours=1))
    return private_sigstore.sign_dsse(
        statement, identity=FIRST_PARTY_IDENTITY, issuer=GITHUB_ISSUER
    ).bundle


def _no(seconds: float) -> None:
    """No pause (the lock outlasts the retries anyway)."""


class LockBeforeStore:
    """``arm(Evidence, …)``: the next upload's lock is taken once it is verified and bound, just
    before ingest writes (everything earlier — sign-in, token — writes freely); ``release()``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.monkeypatch = monkeypatch
        self.stack = contextlib.ExitStack()
        self.models: tuple[Any, ...] = ()
        bind = ingest_service.bind_recipe

        def bind_then_lock(*args: Any) -> Any:
            found = bind(*args)
            if self.models:
                self.stack.enter_context(tables_locked(*self.models))
                self.models = ()
            return found

        monkeypatch.setattr(ingest_service, "bind_recipe", bind_then_lock)

    def arm(self, *models: Any, until_log_retry: bool = True) -> None:
        """``until_log_retry``: the contention ends while ingest pauses before writing the
        upload log (as a busy SQLite writer finishes); else it outlasts every retry."""
        self.models = models
        self.monkeypatch.setattr(
            ingest_upload_log,
            "time",
            SimpleNamespace(sleep=self._pause if until_log_retry else _no),
        )

    def _pause(self, seconds: float) -> None:
        self.release()

    def release(self) -> None:
        self.stack.close()


@pytest.fixture
def lock(monkeypatch: pytest.MonkeyPatch) -> Iterator[LockBeforeStore]:
    helper = LockBeforeStore(monkeypatch)
    try:
        yield helper
    finally:
        helper.release()


def test_a_locked_evidence_table_answers_503_with_retry_after_and_a_log_row(
    bundle: bytes, lock: LockBeforeStore
) -> None:
    user = user_with_role(username="carol", role="contributor")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token_create(user=user, role='contributor')[1]}")
    lock.arm(Evidence)

    response = client.post(
        "/api/v1/evidence/", {"bundle": SimpleUploadedFile("e.sigstore.json", bundle)}
    )

    assert response.status_code == 503, response.content[:300]
    assert response["Retry-After"] == str(ingest_module.RETRY_AFTER_SECONDS)
    body = response.json()
    assert (body["id"], body["verdict"], body["failed_step"]) == (None, "", "store")
    assert "nothing was stored" in body["reason"]
    assert "retry in" in body["reason"]
    assert not Evidence.objects.exists()
    log = UploadLog.objects.get()
    assert (log.outcome, log.failed_step, log.evidence_id) == ("busy", "store", None)


def test_the_upload_form_answers_503_too(bundle: bytes, lock: LockBeforeStore) -> None:
    client = Client()
    client.force_login(user_with_role(username="alice", role="contributor"))
    lock.arm(Evidence)

    response = client.post(
        "/evidence/new/", {"bundle": SimpleUploadedFile("e.sigstore.json", bundle)}
    )

    page = response.content.decode()
    assert response.status_code == 503, page[:300]
    assert response["Retry-After"] == str(ingest_module.RETRY_AFTER_SECONDS)
    assert "Not stored: please retry" in page
    assert UploadLog.objects.get().outcome == "busy"


def test_when_the_log_cannot_be_written_either_it_says_so(
    bundle: bytes,
    lock: LockBeforeStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    lock.arm(Evidence, UploadLog, until_log_retry=False)

    with caplog.at_level(logging.WARNING):
        result = ingest_module.evidence_ingest(
            data=bundle, artifact=None, filename="e.json", user=None, channel="api"
        )

    assert (result.outcome, result.retry_after) == ("busy", ingest_module.RETRY_AFTER_SECONDS)
    assert result.upload is None
    assert any("upload log NOT written after 3 tries" in r.getMessage() for r in caplog.records)


def test_the_same_upload_is_stored_once_the_lock_is_gone(
    bundle: bytes, lock: LockBeforeStore
) -> None:
    def upload() -> Any:
        return ingest_module.evidence_ingest(
            data=bundle, artifact=None, filename="e.json", user=None, channel="api"
        )

    lock.arm(Evidence)
    refused = upload()
    stored = upload()

    assert (refused.outcome, stored.outcome) == ("busy", "created")
    assert Evidence.objects.count() == 1
    assert list(UploadLog.objects.order_by("pk").values_list("outcome", flat=True)) == [
        "busy",
        "created",
    ]


def test_a_refusal_before_reading_stands_when_its_log_cannot_be_written(
    bundle: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR), tables_locked(UploadLog):
        result = ingest_module.upload_refused(
            user=None,
            channel="api",
            size=10**9,
            reason="too large",
            outcome=UploadOutcome.TOO_LARGE,
        )

    assert (result.outcome, result.upload) == ("too_large", None)
    assert not UploadLog.objects.exists()
    assert any("upload log NOT written" in r.getMessage() for r in caplog.records)
