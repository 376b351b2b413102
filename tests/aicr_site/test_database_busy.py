"""Which database errors are a busy moment (503, retry) and which are real failures (500)."""

from __future__ import annotations

import sqlite3

import psycopg
import pytest
from django.db import IntegrityError, OperationalError, ProgrammingError
from psycopg_pool import PoolTimeout

from aicr_site.lib.db import is_database_busy


def _django(error_class: type[Exception], cause: Exception) -> Exception:
    """A driver error as Django's wrapper re-raises it (the driver's error as the cause)."""
    try:
        try:
            raise cause
        except Exception as exc:
            raise error_class(str(exc)) from exc
    except Exception as wrapped:
        return wrapped


@pytest.mark.parametrize(
    ("error", "busy"),
    [
        pytest.param(
            _django(OperationalError, sqlite3.OperationalError("database is locked")),
            True,
            id="sqlite-database-locked",
        ),
        pytest.param(
            _django(OperationalError, sqlite3.OperationalError("database table is locked")),
            True,
            id="sqlite-table-locked",
        ),
        pytest.param(
            _django(OperationalError, sqlite3.OperationalError("no such table: x")),
            False,
            id="sqlite-no-such-table",
        ),
        pytest.param(
            _django(OperationalError, sqlite3.OperationalError("disk I/O error")),
            False,
            id="sqlite-io-error",
        ),
        pytest.param(
            _django(OperationalError, psycopg.OperationalError("sorry, too many clients")),
            True,
            id="postgresql-too-many-clients",
        ),
        pytest.param(
            _django(OperationalError, PoolTimeout("couldn't get a connection after 10 sec")),
            True,
            id="postgresql-pool-timeout-wrapped",
        ),
        pytest.param(PoolTimeout("couldn't get a connection"), True, id="pool-timeout-bare"),
        pytest.param(
            _django(IntegrityError, sqlite3.IntegrityError("UNIQUE constraint failed")),
            False,
            id="integrity-error",
        ),
        pytest.param(
            _django(ProgrammingError, psycopg.ProgrammingError("syntax error")),
            False,
            id="programming-error",
        ),
        pytest.param(ValueError("NUL"), False, id="value-error"),
    ],
)
def test_is_database_busy(error: Exception, busy: bool) -> None:
    assert is_database_busy(error) is busy
