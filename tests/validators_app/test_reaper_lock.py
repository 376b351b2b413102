"""Two beat processes by mistake (or a pass overtaken by the next tick): one reaper pass at a
time across the site. On PostgreSQL the lock is an advisory lock other hosts see; run under
DATABASE_URL=postgres://… for that path (the multi-host test, tests/deploy/, runs two beats)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection

from aicr_site.lib.locks import held_alone
from validators_app import tasks
from validators_app.services import runs

pytestmark = pytest.mark.django_db(transaction=True)


def _hold_in_another_thread(name: str) -> tuple[threading.Event, threading.Thread]:
    """Another holder (its own database connection, as another host's beat would have)."""
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with held_alone(name) as held:
                assert held
                holding.set()
                release.wait(30)
        finally:
            connection.close()

    thread = threading.Thread(target=hold)
    thread.start()
    assert holding.wait(30)
    return release, thread


def test_a_second_pass_skips_while_one_holds_the_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    passes: list[int] = []
    monkeypatch.setattr(runs, "runs_reap", lambda: passes.append(1) or [])
    release, thread = _hold_in_another_thread(tasks.REAPER_LOCK)
    try:
        assert tasks.runs_reap() is None
        assert passes == []
    finally:
        release.set()
        thread.join()
    assert tasks.runs_reap() == 0  # the lock is free again: this pass runs
    assert passes == [1]


def test_the_lock_is_released_when_a_pass_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def explode() -> Any:
        raise RuntimeError("reaper bug")

    monkeypatch.setattr(runs, "runs_reap", explode)
    with pytest.raises(RuntimeError):
        tasks.runs_reap()
    with held_alone(tasks.REAPER_LOCK) as held:
        assert held
