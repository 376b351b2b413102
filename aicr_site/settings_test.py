"""Settings for the test suite: development mode unless the environment says otherwise, and a
fast password hasher (the default PBKDF2 makes every sign-in in a test cost most of a second).

``DEBUG=1`` is set in the environment, not only here, so subprocesses the tests start (a Celery
worker, gunicorn) inherit development mode too.
"""

from __future__ import annotations

import os

os.environ.setdefault("DEBUG", "1")

from aicr_site.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# The suite's Celery workers exist only inside the tests that start one (CI sets REDIS_URL, so
# nothing would build the publication): reads build it in place, and the tests of the queued
# build (tests/evidence_app/test_publication_artefact.py) turn this on.
PUBLICATION_BUILT_BY_WORKER = False
