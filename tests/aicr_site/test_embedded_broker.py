"""`make run`'s Celery setup: a worker with embedded beat takes tasks from both queues through
kombu's filesystem transport, with no broker service running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

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
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=30)

    text = log_path.read_text()
    assert not (REPO_ROOT / "control").exists()  # kombu's state stays in the embedded folder
    assert (tmp_path / "celery" / "control" / "ingest.exchange").exists()
    assert "beat: Starting" in text, text[-2000:]
    assert "('ingest', 40, 2)" in text, text[-2000:]
    assert "('validation', 40, 2)" in text, text[-2000:]
