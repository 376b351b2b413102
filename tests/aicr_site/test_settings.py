"""Settings come from the environment and production mode refuses to start half-configured."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

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


def _print(expression: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DEBUG", "SECRET_KEY", "ALLOWED_HOSTS", "DATABASE_URL", "REDIS_URL"}
    }
    code = (
        "import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'aicr_site.settings';"
        f"django.setup(); from django.conf import settings as s; print(repr({expression}))"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        env={**clean, "DEBUG": "1", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_sqlite_takes_concurrent_writers() -> None:
    result = _print("s.DATABASES['default']['OPTIONS']", {})

    assert result.returncode == 0, result.stderr
    options = eval(result.stdout)  # noqa: S307 - our own repr()
    assert options["transaction_mode"] == "IMMEDIATE"
    assert "PRAGMA journal_mode=WAL" in options["init_command"]
    assert options["timeout"] == 20


def test_postgresql_goes_through_a_bounded_pool() -> None:
    url = {"DATABASE_URL": "postgres://u@127.0.0.1:5432/db", "DB_POOL_MAX_SIZE": "7"}

    database = "s.DATABASES['default']"
    pooled = _print(f"({database}['OPTIONS'], {database}['CONN_MAX_AGE'])", url)
    unpooled = _print(f"{database}['OPTIONS']", {**url, "DB_POOL": "0"})

    assert pooled.returncode == 0, pooled.stderr
    options, conn_max_age = eval(pooled.stdout)  # noqa: S307 - our own repr()
    assert options["pool"]["max_size"] == 7
    assert conn_max_age == 0  # Django's pool replaces persistent connections
    assert "pool" not in eval(unpooled.stdout)  # noqa: S307


def test_tasks_run_eagerly_unless_a_broker_is_there(tmp_path: Any) -> None:
    keys = "(s.CELERY_TASK_ALWAYS_EAGER, s.CELERY_BROKER_URL)"

    nothing = _print(keys, {})
    embedded = _print(keys, {"CELERY_EMBEDDED_BROKER": "1", "CELERY_EMBEDDED_DIR": str(tmp_path)})
    redis = _print(keys, {"CELERY_EMBEDDED_BROKER": "1", "REDIS_URL": "redis://127.0.0.1:1/0"})

    assert eval(nothing.stdout) == (True, "memory://")  # noqa: S307
    assert eval(embedded.stdout) == (False, "filesystem://")  # noqa: S307
    assert (tmp_path / "queue").is_dir()
    assert eval(redis.stdout) == (False, "redis://127.0.0.1:1/0")  # noqa: S307


def test_x_forwarded_for_counts_for_sign_in_throttling_only_when_trusted() -> None:
    order = "s.AXES_IPWARE_META_PRECEDENCE_ORDER"

    assert eval(_print(order, {}).stdout) == ("REMOTE_ADDR",)  # noqa: S307
    trusted = _print(order, {"TRUST_X_FORWARDED_FOR": "1"})
    assert eval(trusted.stdout) == ("HTTP_X_FORWARDED_FOR", "REMOTE_ADDR")  # noqa: S307
