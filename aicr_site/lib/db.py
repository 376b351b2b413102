"""Telling a database that is busy for a moment from one that is broken."""

from __future__ import annotations

import sqlite3

from django.db import InterfaceError, OperationalError
from psycopg_pool import PoolTimeout


def is_database_busy(exc: BaseException) -> bool:
    """A lock or connection shortage that passes: SQLite's busy timeout ran out, or PostgreSQL
    could not give a connection (none free in the pool, too many clients, the server down or
    restarting, a kept connection closed under it). Other database
    errors (SQLite's "no such table" is an OperationalError too) are real failures."""
    if isinstance(exc, PoolTimeout):
        return True
    if isinstance(exc, InterfaceError):
        # "connection already closed": the server restarted under a kept connection.
        return True
    if not isinstance(exc, OperationalError):
        return False
    if isinstance(exc.__cause__, sqlite3.OperationalError):
        text = str(exc).lower()
        return "locked" in text or "busy" in text
    return True
