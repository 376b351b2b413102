"""A lock held by one process of the whole site at a time, for periodic passes that two beat
processes (a deployment mistake, or a second one started while the first is still draining)
would otherwise run side by side.

On PostgreSQL, a session advisory lock: it lives in the database every host shares and ends
with the holder's connection, so a worker killed mid-pass leaves nothing to expire. Elsewhere
(SQLite: one host by definition) an atomic ``cache.add`` with a timeout.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from django.core.cache import cache
from django.db import DatabaseError, connection

logger = logging.getLogger(__name__)

CACHE_LOCK_SECONDS = 15 * 60


def _advisory_key(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


@contextmanager
def held_alone(name: str) -> Iterator[bool]:
    """Yields True when this process now holds the lock ``name`` (released when the block
    exits), False when another holds it: the caller then skips its pass. Never waits."""
    if connection.vendor == "postgresql":
        key = _advisory_key(name)
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
            held = bool(cursor.fetchone()[0])
        try:
            yield held
        finally:
            if held:
                try:
                    with connection.cursor() as cursor:
                        cursor.execute("SELECT pg_advisory_unlock(%s)", [key])
                except DatabaseError:
                    # The connection is gone, and the session's lock with it.
                    logger.warning("lock %s: connection lost before unlock", name)
        return
    token = uuid.uuid4().hex
    held = cache.add(f"lock:{name}", token, CACHE_LOCK_SECONDS)
    try:
        yield held
    finally:
        if held and cache.get(f"lock:{name}") == token:
            cache.delete(f"lock:{name}")
