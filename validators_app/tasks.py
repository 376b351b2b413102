"""Celery tasks of the validators app (queue ``validation``): thin, idempotent, ids only.

``run_execute`` is safe to deliver twice: the claim (a conditional UPDATE in
``services.runs.run_claim``) lets one worker in; a second delivery finds the run taken (or
finished) and returns. ``acks_late``: a worker killed mid-run leaves its message to be
redelivered, and the beat reaper re-enqueues runs whose heartbeat stopped anyway.
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings

from aicr_site.lib.locks import held_alone
from validators_app.services import runs

logger = logging.getLogger(__name__)


@shared_task(
    name="validators_app.tasks.run_execute",
    acks_late=True,
    soft_time_limit=settings.VALIDATION_RUN_TIME_LIMIT_SECONDS,
    time_limit=settings.VALIDATION_RUN_TIME_LIMIT_SECONDS + 120,
)
def run_execute(run_id: int) -> str | None:
    """Run validation run ``run_id`` to its end on this worker; its final status, or None when
    another worker holds it (or it is gone or finished)."""
    run = runs.run_execute(run_id=run_id)
    return run.status if run is not None else None


@shared_task(name="validators_app.tasks.run_publish", acks_late=True)
def run_publish(run_id: int) -> str | None:
    """Publish run ``run_id`` if it is still ``publishing`` (sent by the reaper when the
    worker that finished it died mid-publish); its final status, or None."""
    run = runs.run_publish_stalled(run_id=run_id)
    return run.status if run is not None else None


REAPER_LOCK = "validators_app.runs_reap"


@shared_task(name="validators_app.tasks.runs_reap", acks_late=True)
def runs_reap() -> int | None:
    """Beat, every VALIDATION_REAP_INTERVAL_SECONDS: re-enqueue runs whose worker died. One
    pass at a time across the site (two beats by mistake, or a slow pass overtaken by the
    next tick): a pass that finds the lock held skips, returning None."""
    with held_alone(REAPER_LOCK) as held:
        if not held:
            logger.info("runs reaper: another pass holds the lock; skipping this one")
            return None
        return len(runs.runs_reap())
