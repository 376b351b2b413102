"""`make run`'s Celery setup: a worker with embedded beat takes tasks from both queues through
kombu's filesystem transport, with no broker service running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.shared_data import REPO_ROOT

CELERY = Path(sys.executable).parent / "celery"
SEND = (
    "import django, os; django.setup();"
    "from aicr_site.celery import app;"
    "from django.conf import settings;"
    "assert not settings.CELERY_TASK_ALWAYS_EAGER;"
    "[app.send_task('celery.accumulate', args=(queue, 40, 2), queue=queue)"
    " for queue in ('ingest', 'validation')]"
)


def test_a_worker_takes_tasks_from_the_embedded_broker(tmp_path: Path) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if k != "REDIS_URL"},
        "DJANGO_SETTINGS_MODULE": "aicr_site.settings",
        "DEBUG": "1",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "CELERY_EMBEDDED_BROKER": "1",
        "CELERY_EMBEDDED_DIR": str(tmp_path / "celery"),
    }
    log_path = tmp_path / "worker.log"
    command = [
        str(CELERY), "-A", "aicr_site", "worker", "-B",
        "--queues", "validation,ingest", "--pool", "solo",
        "--schedule", str(tmp_path / "beat-schedule"), "--loglevel", "INFO",
    ]  # fmt: skip
    with log_path.open("wb") as log:
        worker = subprocess.Popen(
            command, cwd=REPO_ROOT, env=env, stdout=log, stderr=log, start_new_session=True
        )
    try:
        sent = subprocess.run(
            [sys.executable, "-c", SEND],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert sent.returncode == 0, sent.stderr
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            text = log_path.read_text()
            if text.count("succeeded") >= 2 or worker.poll() is not None:
                break
            time.sleep(0.5)
    finally:
        # What is tested here is taking tasks; the warm shutdown (5-9 s on this broker) is the
        # next test's, so this worker and its pool and beat are killed at once.
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=30)

    text = log_path.read_text()
    assert not (REPO_ROOT / "control").exists()  # kombu's state stays in the embedded folder
    assert (tmp_path / "celery" / "control" / "ingest.exchange").exists()
    assert "beat: Starting" in text, text[-2000:]
    assert "('ingest', 40, 2)" in text, text[-2000:]
    assert "('validation', 40, 2)" in text, text[-2000:]


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def test_it_stops_by_itself_on_ctrl_c_as_make_run_starts_it_and_leaves_no_process(
    tmp_path: Path,
) -> None:
    """``make run``'s worker (prefork, two processes, embedded beat) on the embedded broker:
    Ctrl-C reaches the whole process group with SIGINT, then the recipe's trap sends SIGTERM,
    then SIGTERM again once gunicorn is gone. The worker must end by itself (the recipe's SIGKILL
    would read -9), and leave no pool or beat process behind. The seconds it
    took are printed (figures in the README; no timing assert: the machine's load decides)."""
    env = {
        **{k: v for k, v in os.environ.items() if k != "REDIS_URL"},
        "DJANGO_SETTINGS_MODULE": "aicr_site.settings",
        "DEBUG": "1",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "CELERY_EMBEDDED_BROKER": "1",
        "CELERY_EMBEDDED_DIR": str(tmp_path / "celery"),
    }
    log_path = tmp_path / "worker.log"
    command = [
        str(CELERY), "-A", "aicr_site", "worker", "-B",
        "--queues", "validation,ingest,celery", "--concurrency", "2",
        "--schedule", str(tmp_path / "beat-schedule"), "--loglevel", "INFO",
    ]  # fmt: skip
    with log_path.open("wb") as log:
        worker = subprocess.Popen(
            command, cwd=REPO_ROOT, env=env, stdout=log, stderr=log, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 60
        while "ready." not in log_path.read_text() and time.monotonic() < deadline:
            assert worker.poll() is None, log_path.read_text()[-2000:]
            time.sleep(0.5)
        assert "ready." in log_path.read_text()
        started = time.monotonic()
        os.killpg(worker.pid, signal.SIGINT)  # the terminal's Ctrl-C
        time.sleep(0.3)
        worker.send_signal(signal.SIGTERM)  # the trap
        time.sleep(1)
        worker.send_signal(signal.SIGTERM)  # after `wait -n` returns
        # A hang guard, not a speed claim: far past make run's own kill.
        status = worker.wait(timeout=120)
        print(f"embedded-broker worker stopped {time.monotonic() - started:.1f} s after Ctrl-C")
        for _ in range(50):  # the pool and beat are reaped by the worker before it exits
            if _group_gone(worker.pid):
                break
            time.sleep(0.1)
        left = _group_gone(worker.pid)
    finally:
        if worker.poll() is None or not _group_gone(worker.pid):
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
    # Celery exits 1 after a Ctrl-C warm shutdown, 0 after SIGTERM's; a kill would read -9.
    assert status in (0, 1), log_path.read_text()[-2000:]
    assert left, "a pool or beat process outlived the worker"
    assert "Warm shutdown" in log_path.read_text()


def test_make_run_ends_even_when_the_worker_ignores_sigterm() -> None:
    """The run recipe's stop logic (from ``trap`` to the last ``wait``, taken from the Makefile,
    with ``WORKER_STOP_SECONDS`` lowered to 1) with stand-ins: gunicorn exits, the worker
    ignores TERM and INT; the recipe still ends, and the stand-in worker is gone (killed)."""
    recipe = (REPO_ROOT / "Makefile").read_text().split("\nrun:", 1)[1].split("\n\n", 1)[0]
    stop = recipe[recipe.index("trap ") :].replace("\\\n", "\n").replace("$$", "$")
    assert "$(WORKER_STOP_SECONDS)" in stop
    stop = stop.replace("$(WORKER_STOP_SECONDS)", "1")
    script = (
        'python3 -c "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); '
        'signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(120)" & worker=$!\n'
        "echo $worker\n"
        "sleep 1 & web=$!\n" + "\n".join(line.strip() for line in stop.splitlines())
    )
    started = time.monotonic()
    ended = subprocess.run(["bash", "-c", script], timeout=60, capture_output=True, text=True)
    print(f"the recipe ended {time.monotonic() - started:.1f} s after its web process")
    stand_in = int(ended.stdout.split()[0])
    with pytest.raises(ProcessLookupError):
        os.kill(stand_in, 0)  # reaped by the recipe's last wait after its SIGKILL


def _embedded_connection(folder: Path) -> Any:
    from kombu import Connection

    from aicr_site.embedded_broker import Transport

    for name in ("queue", "processed", "control"):
        (folder / name).mkdir(parents=True, exist_ok=True)
    return Connection(
        "filesystem://",
        transport=Transport,
        transport_options={
            "data_folder_in": str(folder / "queue"),
            "data_folder_out": str(folder / "queue"),
            "processed_folder": str(folder / "processed"),
            "control_folder": str(folder / "control"),
            "polling_interval": 0.05,
        },
    )


def test_the_embedded_transport_delivers_and_its_wait_ends_when_the_worker_is_told_to_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The drain Celery's loop waits in (``aicr_site/embedded_broker.py``): a message is
    delivered; with nothing queued and no timeout it waits until the shutdown flag Ctrl-C sets
    is up, then answers "nothing yet" so the loop's own shutdown check runs. Kombu's own drain
    would keep polling here until the timeout, forever with none."""
    from celery.worker import state
    from kombu import Exchange, Queue

    received: list[Any] = []
    outcome: list[BaseException] = []
    with _embedded_connection(tmp_path) as connection:
        queue = Queue("q", Exchange("q", type="direct"), routing_key="q")
        with connection.Producer() as producer:
            producer.publish({"n": 1}, exchange=queue.exchange, routing_key="q", declare=[queue])
        with connection.Consumer(queue, callbacks=[lambda body, msg: received.append(body)]):
            connection.drain_events(timeout=10)
            assert received == [{"n": 1}]

            def wait_for_more() -> None:
                try:
                    connection.drain_events(timeout=None)
                except BaseException as exc:  # handed to the test's thread
                    outcome.append(exc)

            waiter = threading.Thread(target=wait_for_more, daemon=True)
            waiter.start()
            waiter.join(0.5)
            assert waiter.is_alive()  # waiting: nothing queued, no shutdown asked
            assert not outcome
            monkeypatch.setattr(state, "should_stop", 1)  # what the Ctrl-C handler sets
            waiter.join(30)  # a hang guard, not a speed claim
    assert not waiter.is_alive()
    assert len(outcome) == 1
    assert isinstance(outcome[0], TimeoutError)
