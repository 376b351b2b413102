"""Settings for the test suite: development mode unless the environment says otherwise, and a
fast password hasher (the default PBKDF2 makes every sign-in in a test cost most of a second).

``DEBUG=1`` is set in the environment, not only here, so subprocesses the tests start (a Celery
worker, gunicorn) inherit development mode too.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

os.environ.setdefault("DEBUG", "1")


def _redis_db_of_this_xdist_worker() -> None:
    """Under pytest-xdist each worker process (``gw0``, ``gw1``, …) gets its own Redis
    database (1, 2, …): the Celery workers some tests start consume the queues of that
    database, and the cache's keys (throttles, the publication) would cross otherwise. The
    environment is changed, not only the setting, so those subprocesses use it too."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    url = os.environ.get("REDIS_URL", "")
    if not (worker.startswith("gw") and worker[2:].isdigit() and url):
        return
    parts = urlsplit(url)
    os.environ["REDIS_URL"] = urlunsplit(parts._replace(path=f"/{int(worker[2:]) + 1}"))


_redis_db_of_this_xdist_worker()

from aicr_site.settings import *  # noqa: E402, F403 (after the environment is set)

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# The suite's Celery workers exist only inside the tests that start one (CI sets REDIS_URL, so
# nothing would build the publication): reads build it in place, and the tests of the queued
# build (tests/evidence_app/test_publication_artefact.py) turn this on.
PUBLICATION_BUILT_BY_WORKER = False
