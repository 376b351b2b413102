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
