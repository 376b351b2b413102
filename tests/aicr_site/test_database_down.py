"""PostgreSQL down (restarting, failing over, unreachable): every route answers 503 with
Retry-After, never 500, and recovers by itself. The routes are the complete list the request
guards keep (tests/aicr_site/test_request_guards.py fails when a route has no row there)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from django.db import InterfaceError, OperationalError
from django.db.backends.base.base import BaseDatabaseWrapper
from django.test import Client

from tests.aicr_site.test_request_guards import ROUTE_PATHS

REFUSED = psycopg.OperationalError(
    'connection to server at "127.0.0.1", port 5432 failed: Connection refused'
)


@contextmanager
def database_down(error: type[Exception] = OperationalError) -> Iterator[list[str]]:
    """Every attempt to use a connection fails as Django raises it when the server is gone;
    yields the list of attempts (so a route that never needed the database is told apart)."""
    attempts: list[str] = []
    original = BaseDatabaseWrapper.ensure_connection

    def refuse(self: BaseDatabaseWrapper) -> None:
        attempts.append(self.alias)
        raise error(str(REFUSED)) from REFUSED

    BaseDatabaseWrapper.ensure_connection = refuse  # type: ignore[method-assign]
    try:
        yield attempts
    finally:
        BaseDatabaseWrapper.ensure_connection = original  # type: ignore[method-assign]


def _assert_unavailable(response: Any, path: str, settings: Any) -> None:
    assert response.status_code == 503, (path, response.status_code)
    assert response["Retry-After"] == str(settings.DB_RETRY_AFTER_SECONDS), path
    assert b"Traceback" not in response.content


@pytest.mark.django_db
@pytest.mark.parametrize("path", ROUTE_PATHS)
def test_every_route_answers_503_with_retry_after_while_the_database_is_down(
    path: str, settings: Any
) -> None:
    settings.DEBUG = False
    client = Client(raise_request_exception=False)
    with database_down() as attempts:
        response = client.get(path)
    if attempts:
        _assert_unavailable(response, path, settings)
    else:  # answered without the database (e.g. /health): anything but an error of ours
        assert response.status_code < 500, (path, response.status_code)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/accounts/login/", "username=a&password=b"),
        ("/api/v1/evidence/", "{}"),
        ("/runs/start/", "recipe=x"),
    ],
)
def test_writes_answer_503_too(path: str, body: str, settings: Any) -> None:
    client = Client(raise_request_exception=False)
    with database_down() as attempts:
        response = client.post(path, body, content_type="application/x-www-form-urlencoded")
    if attempts:
        _assert_unavailable(response, path, settings)
    else:  # refused before the database was needed (sign-in required)
        assert response.status_code < 500, (path, response.status_code)


@pytest.mark.django_db
@pytest.mark.parametrize("debug", [False, True])
def test_a_connection_closed_under_the_request_answers_503(settings: Any, debug: bool) -> None:
    """psycopg's InterfaceError ("connection already closed") after a server restart."""
    settings.DEBUG = debug
    client = Client(raise_request_exception=False)
    with database_down(InterfaceError):
        response = client.get("/recipes/")
    _assert_unavailable(response, "/recipes/", settings)


@pytest.mark.django_db
def test_ready_names_the_database_and_recovers_without_a_restart(
    client: Client, settings: Any
) -> None:
    with database_down():
        down = client.get("/ready")
    assert down.status_code == 503
    assert down["Retry-After"]
    assert down.json()["missing"] == ["database"]
    assert "Connection refused" in down.json()["checks"]["database"]["detail"]
    assert client.get("/recipes/").status_code == 200
