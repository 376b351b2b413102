"""Production secrets: each read from NAME or a NAME_FILE (compose secrets), and a production
process that lacks one refuses to start, naming it, instead of failing at first use."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from evidence_app.services.site_key import generate_pem
from tests.shared_data import REPO_ROOT

SECRET_NAMES = {
    "DEBUG",
    "SECRET_KEY",
    "ALLOWED_HOSTS",
    "DATABASE_URL",
    "REDIS_URL",
    "CLUSTER_KUBECONFIG_KEY",
    "SITE_SIGNING_KEY",
}
PRINT = (
    "import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'aicr_site.settings';"
    "django.setup(); from django.conf import settings as s; print({expression})"
)


def _clean_env(env: dict[str, str]) -> dict[str, str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in SECRET_NAMES and not k.endswith("_FILE") and k != "DJANGO_SETTINGS_MODULE"
    }
    return {**clean, **env}


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=REPO_ROOT, env=_clean_env(env), capture_output=True, text=True, timeout=120
    )


def _print(expression: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return _run([sys.executable, "-c", PRINT.format(expression=expression)], env)


@pytest.fixture
def secret_files(tmp_path: Path) -> dict[str, str]:
    """Every production secret as a file, as compose mounts them (/run/secrets/…)."""
    files = {
        "SECRET_KEY_FILE": ("secret_key", "s" * 60 + "\n"),
        # Rotation: newest first, one a line (or comma-separated).
        "CLUSTER_KUBECONFIG_KEY_FILE": (
            "cluster_kubeconfig_key",
            f"{Fernet.generate_key().decode()}\n{Fernet.generate_key().decode()}\n",
        ),
        "SITE_SIGNING_KEY_FILE": ("site_signing_key", generate_pem().decode()),
        "DATABASE_PASSWORD_FILE": ("db_password", "pw-from-a-file\n"),
    }
    # The web process also needs collectstatic's manifest (an empty one: nothing is rendered).
    static = tmp_path / "static"
    static.mkdir()
    (static / "staticfiles.json").write_text('{"paths": {}, "version": "1.1", "hash": ""}')
    env = {"DEBUG": "0", "ALLOWED_HOSTS": "a.example", "STATIC_ROOT": str(static)}
    for name, (filename, text) in files.items():
        (tmp_path / filename).write_text(text)
        env[name] = str(tmp_path / filename)
    return env


def test_every_secret_is_read_from_its_file(secret_files: dict[str, str]) -> None:
    result = _print(
        "len(s.SECRET_KEY), len(s.CLUSTER_KUBECONFIG_KEYS), "
        "s.SITE_SIGNING_KEY.startswith('-----BEGIN'), s.DATABASES['default']['PASSWORD']",
        {**secret_files, "DATABASE_URL": "postgres://u:pw-in-url@127.0.0.1:5432/db"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["60", "2", "True", "pw-from-a-file"]


def test_a_secret_and_its_file_together_are_refused(secret_files: dict[str, str]) -> None:
    result = _print("s.SECRET_KEY", {**secret_files, "SECRET_KEY": "t" * 60})
    assert result.returncode != 0
    assert "set SECRET_KEY or SECRET_KEY_FILE, not both" in result.stderr


def test_an_unreadable_secret_file_is_named(secret_files: dict[str, str], tmp_path: Path) -> None:
    result = _print(
        "s.SITE_SIGNING_KEY", {**secret_files, "SITE_SIGNING_KEY_FILE": str(tmp_path / "gone")}
    )
    assert result.returncode != 0
    assert "SITE_SIGNING_KEY_FILE cannot be read (FileNotFoundError)" in result.stderr
    assert "BEGIN" not in result.stderr


def test_a_complete_production_configuration_passes_its_checks(
    secret_files: dict[str, str],
) -> None:
    result = _run([sys.executable, "manage.py", "check", "--tag", "security"], secret_files)
    assert result.returncode == 0, result.stderr
    wsgi = _run([sys.executable, "-c", "import aicr_site.wsgi"], secret_files)
    assert wsgi.returncode == 0, wsgi.stderr


CHECK = [sys.executable, "manage.py", "check"]
WSGI = [sys.executable, "-c", "import aicr_site.wsgi"]
CELERY = [sys.executable, "-m", "celery", "-A", "aicr_site"]
SCHEDULE = "{tmp_path}/celerybeat-schedule"


@pytest.mark.parametrize(
    ("process", "missing"),
    [
        pytest.param(CHECK, "CLUSTER_KUBECONFIG_KEY", id="manage-check"),
        pytest.param(WSGI, "SITE_SIGNING_KEY", id="web-wsgi"),
        pytest.param([*CELERY, "worker", "--pool", "solo"], "CLUSTER_KUBECONFIG_KEY", id="worker"),
        # The schedule file lives in the test's folder: beat deletes a schedule it cannot open as
        # a database and writes a new one, so as root "/dev/null" here replaced the device with
        # a plain file and broke every later subprocess that wrote to it (initdb among them).
        pytest.param([*CELERY, "beat", "--schedule", SCHEDULE], "SITE_SIGNING_KEY", id="beat"),
    ],
)
def test_a_production_process_refuses_to_start_without_a_secret(
    secret_files: dict[str, str], process: list[str], missing: str, tmp_path: Path
) -> None:
    """Web (gunicorn imports aicr_site.wsgi), worker, beat and every management command."""
    env = {k: v for k, v in secret_files.items() if k != f"{missing}_FILE"}
    result = _run([arg.format(tmp_path=tmp_path) for arg in process], env)
    assert result.returncode != 0, result.stdout + result.stderr
    named = (f"{missing} (or {missing}_FILE)", f"{missing} is missing")
    assert any(text in result.stderr for text in named), result.stderr


def test_the_web_process_refuses_to_start_without_collected_static_files(
    secret_files: dict[str, str], tmp_path: Path
) -> None:
    """Without the manifest every page (the 500 page too) would raise: gunicorn's bare error."""
    empty = tmp_path / "not-collected"
    empty.mkdir()
    result = _run(WSGI, {**secret_files, "STATIC_ROOT": str(empty)})
    assert result.returncode != 0, result.stdout + result.stderr
    assert "static files are not collected" in result.stderr, result.stderr
    assert f"{empty}/staticfiles.json is missing" in result.stderr
    assert "manage.py collectstatic" in result.stderr
