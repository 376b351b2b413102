"""What every long-running process does before it takes work: refuse without its production
secrets (aicr_site/secrets.py), and wait, bounded and logged, for PostgreSQL and the broker.

Compose (or any orchestrator) may start the processes in any order and restart the database or
Redis under them. A worker or beat that starts first waits here instead of crashing into a
restart loop; past ``STARTUP_WAIT_SECONDS`` it stops, naming the dependency that never answered
and why. The web process does not wait: it starts, ``/ready`` answers 503 naming what is missing
and every request answers 503 with ``Retry-After`` until the database answers
(``DatabaseBusyMiddleware``), so a load balancer keeps traffic away and nothing needs a restart.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence

from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from aicr_site.secrets import require_production_secrets

logger = logging.getLogger("aicr_site.startup")

DEFAULT_WAIT_SECONDS = 120.0
POLL_SECONDS = 1.0


def _database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return connection.vendor
    finally:
        # Nothing opened here may be inherited by a forked pool process (Celery's prefork).
        connection.close()
        if hasattr(connection, "close_pool"):
            connection.close_pool()


def _migrations() -> str:
    """The schema is this code's: no migration left unapplied (beat schedules tasks that query
    the tables, and ``migrate`` may still be running when it starts)."""
    from django.db.migrations.executor import MigrationExecutor

    try:
        executor = MigrationExecutor(connection)
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    finally:
        connection.close()
        if hasattr(connection, "close_pool"):
            connection.close_pool()
    if plan:
        first = plan[0][0]
        raise RuntimeError(
            f"{len(plan)} migration(s) not applied yet, first {first.app_label}.{first.name}"
        )
    return "applied"


def _broker() -> str:
    from aicr_site import health

    return health.CHECKS["broker"]()


DEPENDENCIES: dict[str, Callable[[], str]] = {
    "database": _database,
    "broker": _broker,
    "migrations": _migrations,
}


class DependencyTimeout(RuntimeError):
    pass


def wait_for_dependencies(
    names: Sequence[str] = ("database", "broker"), timeout: float | None = None
) -> None:
    """Return once every dependency in ``names`` answers; ``DependencyTimeout`` naming the
    first that did not within ``timeout`` seconds (``STARTUP_WAIT_SECONDS``, default 120)."""
    if timeout is None:
        timeout = float(os.environ.get("STARTUP_WAIT_SECONDS") or DEFAULT_WAIT_SECONDS)
    deadline = time.monotonic() + timeout
    for name in names:
        attempt = 0
        while True:
            attempt += 1
            try:
                detail = DEPENDENCIES[name]()
            except Exception as exc:  # any failure means "not yet"; it is logged, then retried
                reason = f"{type(exc).__name__}: {str(exc)[:200]}"
                if time.monotonic() >= deadline:
                    raise DependencyTimeout(
                        f"the {name} did not answer within {timeout:g} s ({reason})"
                    ) from None
                logger.warning("waiting for the %s (attempt %d): %s", name, attempt, reason)
                time.sleep(POLL_SECONDS)
                continue
            if attempt > 1:
                logger.info("the %s answers (%s) after %d attempts", name, detail, attempt)
            break


def require_collected_static() -> None:
    """A web process that serves hashed static files needs ``collectstatic``'s manifest: without
    it every page that names a stylesheet raises, and so does the 500 page, so each request
    would end in gunicorn's bare error page. Refuse to start instead, naming the fix. (The image
    collects at build time; a process started from a checkout, or before ``collectstatic`` has
    finished, has none.)"""
    from django.contrib.staticfiles.storage import ManifestFilesMixin
    from django.core.files.storage import storages

    storage = storages["staticfiles"]
    if not isinstance(storage, ManifestFilesMixin):
        return
    if not storage.exists(storage.manifest_name):
        raise ImproperlyConfigured(
            f"static files are not collected: {storage.path(storage.manifest_name)} is missing "
            "(run `manage.py collectstatic` before starting the web process)"
        )


def process_start(*, wait: Sequence[str], web: bool = False) -> None:
    """Start-up of a web, worker or beat process: secrets first (no point waiting without them),
    then, for the web process, its collected static files, then the dependencies in ``wait``."""
    require_production_secrets()
    if web:
        require_collected_static()
    if wait:
        wait_for_dependencies(wait)


def celery_process_start(*, wait: Sequence[str]) -> None:
    """``process_start`` from a Celery signal, which logs and swallows a receiver's exception:
    the process must stop, so the refusal is logged and turned into an exit."""
    try:
        process_start(wait=wait)
    except (ImproperlyConfigured, DependencyTimeout) as exc:
        logger.critical("not starting: %s", exc)
        raise SystemExit(f"not starting: {exc}") from None
