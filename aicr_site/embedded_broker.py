"""The embedded broker's transport (``CELERY_EMBEDDED_BROKER``): kombu's filesystem transport,
whose wait for messages ends as soon as the worker has been asked to shut down.

Why: kombu's filesystem transport cannot wake an event loop, so Celery runs its synchronous
consumer loop, which calls ``drain_events(timeout=2.0)`` and checks the shutdown flags that
Ctrl-C sets only between two drains; kombu's virtual transport keeps polling the queue folder
until that timeout runs out. On a loaded machine that was 3.5-3.8 s from Ctrl-C to the first
shutdown step. Here the drain looks at the flags (``celery.worker.state.should_stop`` /
``should_terminate``) after every poll and returns as a timeout, so the loop's own check runs
within one polling interval. With Redis the worker's event loop wakes at once and this is not
used. (Followed: ``synloop`` in celery/worker/loops.py, ``Transport.drain_events`` in
kombu/transport/virtual/base.py, ``maybe_shutdown`` in celery/worker/state.py.)
"""

from __future__ import annotations

import time
from queue import Empty
from typing import Any

from celery.worker import state
from kombu.transport import filesystem


def _shutdown_requested() -> bool:
    # Celery stores the exit code in the flag (0 included); None or False mean "not asked".
    return any(
        flag is not None and flag is not False
        for flag in (state.should_stop, state.should_terminate)
    )


class Transport(filesystem.Transport):
    # The signature of kombu's virtual Transport, which its stubs also mark as an override.
    def drain_events(self, connection: Any, timeout: float | None = None) -> None:  # type: ignore[override]
        cycle, interval = self.cycle, self.polling_interval
        assert cycle is not None  # set up with the transport's first channel
        started = time.monotonic()
        while True:
            try:
                cycle.get(self._deliver, timeout=timeout)
                return
            except Empty:
                pass
            # Celery's loop takes a timeout (socket.timeout is TimeoutError) as "nothing yet".
            if _shutdown_requested():
                raise TimeoutError()
            if timeout is not None and time.monotonic() - started >= timeout:
                raise TimeoutError()
            if interval is not None:
                time.sleep(interval)
