"""Settings come from the environment and production mode refuses to start half-configured."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.shared_data import REPO_ROOT

PRINT_SETTINGS = (
    "import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'aicr_site.settings';"
    "django.setup(); from django.conf import settings as s;"
    "print(s.DEBUG, s.DATABASES['default']['ENGINE'], s.CELERY_TASK_ALWAYS_EAGER, s.ALLOWED_HOSTS)"
)


def _run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DEBUG", "SECRET_KEY", "ALLOWED_HOSTS", "DATABASE_URL", "REDIS_URL"}
    }
    return subprocess.run(
        [sys.executable, "-c", PRINT_SETTINGS],
        cwd=REPO_ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_it_is_production_with_nothing_set() -> None:
    """DEBUG is off unless asked for, so an unconfigured deployment refuses to start."""
    result = _run({})
    assert result.returncode != 0
    assert "SECRET_KEY must be set when DEBUG is off" in result.stderr


def test_it_runs_embedded_in_development_mode() -> None:
    result = _run({"DEBUG": "1"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[:3] == ["True", "django.db.backends.sqlite3", "True"]


def test_it_refuses_production_without_a_secret_key() -> None:
    result = _run({"DEBUG": "0", "ALLOWED_HOSTS": "example.org"})
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


def test_it_refuses_production_without_allowed_hosts() -> None:
    result = _run({"DEBUG": "0", "SECRET_KEY": "x" * 60})
    assert result.returncode != 0
    assert "ALLOWED_HOSTS must be set" in result.stderr


def test_it_reads_database_and_redis_urls() -> None:
    result = _run(
        {
            "DEBUG": "false",
            "SECRET_KEY": "x" * 60,
            "ALLOWED_HOSTS": "a.example,b.example",
            "DATABASE_URL": "postgres://u@127.0.0.1:5432/db",
            "REDIS_URL": "redis://127.0.0.1:6379/0",
        }
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "False",
        "django.db.backends.postgresql",
        "False",
        "['a.example',",
        "'b.example']",
    ]


def test_it_rejects_a_malformed_boolean() -> None:
    result = _run({"DEBUG": "maybe"})
    assert result.returncode != 0
    assert "DEBUG='maybe' is not a boolean" in result.stderr
