import os
from typing import Any

from celery import Celery
from celery.signals import beat_init, worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aicr_site.settings")

app = Celery("aicr_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
def _worker_start(**kwargs: Any) -> None:
    """A worker refuses without its secrets and waits for PostgreSQL and the broker
    (aicr_site/startup.py) before it takes a task."""
    from aicr_site.startup import celery_process_start

    celery_process_start(wait=("database", "broker"))


@beat_init.connect
def _beat_start(**kwargs: Any) -> None:
    """Beat sends only to the broker, but the tasks it schedules (the reaper at once) query
    tables: it waits for the broker, then until ``migrate`` has applied every migration."""
    from aicr_site.startup import celery_process_start

    celery_process_start(wait=("broker", "migrations"))
