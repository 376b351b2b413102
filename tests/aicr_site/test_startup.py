"""Start-up order: a worker or beat started before PostgreSQL or Redis answers waits, bounded
and logged, instead of crashing (aicr_site/startup.py); past the bound it stops, naming which."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from aicr_site import startup
from tests.shared_data import REPO_ROOT


def test_it_waits_until_a_dependency_answers(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    answers = iter([RuntimeError("connection refused"), RuntimeError("starting up"), "ok"])

    def flaky() -> str:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setitem(startup.DEPENDENCIES, "database", flaky)
    monkeypatch.setattr(startup, "POLL_SECONDS", 0.01)
    startup.wait_for_dependencies(["database"], timeout=10)
    waits = [r.getMessage() for r in caplog.records if "waiting for the database" in r.getMessage()]
    assert waits == [
        "waiting for the database (attempt 1): RuntimeError: connection refused",
        "waiting for the database (attempt 2): RuntimeError: starting up",
    ]


def test_it_stops_after_the_bound_naming_the_dependency(monkeypatch: pytest.MonkeyPatch) -> None:
    def down() -> str:
        raise ConnectionRefusedError("nothing listens")

    monkeypatch.setitem(startup.DEPENDENCIES, "broker", down)
    monkeypatch.setattr(startup, "POLL_SECONDS", 0.01)
    with pytest.raises(startup.DependencyTimeout, match=r"the broker did not answer within 0\.2 s"):
        startup.wait_for_dependencies(["broker"], timeout=0.2)


@pytest.mark.parametrize("which", ["database", "broker"])
def test_a_worker_started_without_its_dependency_waits_then_names_it(
    which: str, tmp_path: Any
) -> None:
    """A real `celery worker`: the discard port (9) never answers."""
    env = {
        **{k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}},
        "DEBUG": "1",
        "STARTUP_WAIT_SECONDS": "3",
        "DJANGO_SETTINGS_MODULE": "aicr_site.settings",
        "DATABASE_URL": "postgres://u@127.0.0.1:9/db"
        if which == "database"
        else f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "REDIS_URL": "redis://127.0.0.1:9/0" if which == "broker" else "",
        "DB_POOL_TIMEOUT_SECONDS": "1",
    }
    if which == "database":
        env["CELERY_EMBEDDED_BROKER"] = "1"
        env["CELERY_EMBEDDED_DIR"] = str(tmp_path / "celery")
    result = subprocess.run(
        [sys.executable, "-m", "celery", "-A", "aicr_site", "worker", "--pool", "solo"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert f"waiting for the {which} (attempt 1)" in result.stderr
    assert f"not starting: the {which} did not answer within 3 s" in result.stderr


def test_beat_waits_until_every_migration_is_applied(tmp_path: Any) -> None:
    """A real `celery beat` on a database `migrate` has not reached yet: it schedules the reaper
    at once, so it waits (naming the first unapplied migration) instead of firing into missing
    tables."""
    env = {
        **{k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}},
        "DEBUG": "1",
        "STARTUP_WAIT_SECONDS": "3",
        "DJANGO_SETTINGS_MODULE": "aicr_site.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'empty.sqlite3'}",
        "REDIS_URL": "",
        "CELERY_EMBEDDED_BROKER": "1",
        "CELERY_EMBEDDED_DIR": str(tmp_path / "celery"),
    }
    result = subprocess.run(
        [sys.executable, "-m", "celery", "-A", "aicr_site", "beat", "-s", str(tmp_path / "s")],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "waiting for the migrations (attempt 1): RuntimeError: " in result.stderr
    assert "migration(s) not applied yet, first " in result.stderr
    assert "not starting: the migrations did not answer within 3 s" in result.stderr
    assert "runs_reap" not in result.stderr


def test_the_migrations_wait_passes_on_a_migrated_database(db: None) -> None:
    assert startup.DEPENDENCIES["migrations"]() == "applied"
