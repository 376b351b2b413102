"""gunicorn's threaded worker, with its port closed as soon as it stops accepting.

On SIGTERM gunicorn's ``gthread`` worker stops accepting (it unregisters its listening socket)
but keeps that socket open until its in-flight requests are answered, up to
``--graceful-timeout``; the kernel meanwhile still completes every handshake into the socket's
backlog, and nginx, seeing the connection made, sends requests that nobody will read. When the
worker exits they are reset: nginx sends a GET on to another web host but answers a POST 502
(it never sends a non-idempotent request twice). The multi-host test saw 3 POSTs of 90 requests
answered 502 so. Closing the socket when accepting stops makes the next connection attempt
refused instead, which nginx moves on from for any method (nothing was sent); what the worker
already accepted is answered as before.

Use: ``gunicorn --worker-class aicr_site.gunicorn_worker.ThreadWorker --threads N`` (compose's
web service and tests/deploy/ do).
"""

from __future__ import annotations

from typing import Any

from gunicorn.workers.gthread import ThreadWorker as _ThreadWorker


class ThreadWorker(_ThreadWorker):
    def set_accept_enabled(self, enabled: bool) -> Any:
        result = super().set_accept_enabled(enabled)
        if not enabled and not self.alive:  # shutting down, not merely at its connection limit
            for listener in self.sockets:
                listener.close()
        return result
