"""``/metrics`` in Prometheus' text format (prometheus-client).

Two kinds of figures:

* per process, from a middleware: ``http_requests_total{method,route,status}`` and
  ``http_request_duration_seconds{method,route}`` (``route`` is the URL pattern's name, never
  the raw path, so ids and recipe names cannot blow up the label set). With several gunicorn
  workers each answers for itself; scrape them all (or set up prometheus-client's multiprocess
  mode) to see the total;
* site-wide, read from the database at each scrape (a few ``COUNT … GROUP BY`` queries):
  stored evidence by verdict and counted, upload (ingest) outcomes by verdict, uploads by state
  (``pending``/``running``: the OCI queue's depth), validation runs by status (every status,
  0 included, so a dashboard's rate of ``failed`` has a series from the start) and, with a Redis
  broker, the length of each Celery queue.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

CELERY_QUEUES = ("ingest", "validation", "celery")

# auto_describe off: registering DatabaseCollector must not query (import time, no database).
REGISTRY = CollectorRegistry(auto_describe=False)
REQUESTS = Counter(
    "http_requests",
    "HTTP requests answered by this process.",
    ["method", "route", "status"],
    registry=REGISTRY,
)
LATENCY = Histogram(
    "http_request_duration_seconds",
    "Time to answer a request in this process (streamed bodies: until the view returned).",
    ["method", "route"],
    registry=REGISTRY,
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)


def _route(request: HttpRequest) -> str:
    match = getattr(request, "resolver_match", None)
    return match.view_name if match is not None and match.view_name else "unmatched"


class MetricsMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        route = _route(request)
        method = request.method if request.method in _METHODS else "other"
        LATENCY.labels(method, route).observe(time.perf_counter() - started)
        REQUESTS.labels(method, route, str(response.status_code)).inc()
        return response


_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class DatabaseCollector(Collector):
    """Evidence, ingest outcomes, validation runs and queue depth, read at scrape time."""

    def describe(self) -> list[GaugeMetricFamily]:
        return []  # nothing is read until a scrape

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from evidence_app.models import Evidence, UploadLog

        evidence = GaugeMetricFamily(
            "aicr_evidence_records",
            "Stored evidence by verdict and counted.",
            labels=["verdict", "counted"],
        )
        counted_by_verdict = dict(
            Evidence.objects.counted().values_list("verdict").annotate(n=Count("pk")).order_by()
        )
        for verdict, n in (
            Evidence.objects.values_list("verdict").annotate(n=Count("pk")).order_by()
        ):
            yes = counted_by_verdict.get(verdict, 0)
            evidence.add_metric([verdict, "true"], yes)
            evidence.add_metric([verdict, "false"], n - yes)
        yield evidence

        outcomes = GaugeMetricFamily(
            "aicr_ingest_outcomes",
            "Finished uploads (the upload log) by verdict (none: refused before verifying).",
            labels=["verdict"],
        )
        states = GaugeMetricFamily(
            "aicr_uploads",
            "Uploads by state (pending/running: the OCI pull queue).",
            labels=["state"],
        )
        by_state: dict[str, int] = {}
        for state, verdict, n in (
            UploadLog.objects.values_list("state", "verdict").annotate(n=Count("pk")).order_by()
        ):
            by_state[state] = by_state.get(state, 0) + n
            if state == "done":
                outcomes.add_metric([verdict or "none"], n)
        for state, n in by_state.items():
            states.add_metric([state], n)
        yield outcomes
        yield states
        yield _runs_by_status()

        depth = _celery_queue_depth()
        if depth is not None:
            queues = GaugeMetricFamily(
                "aicr_celery_queue_length",
                "Messages waiting in each Celery queue.",
                labels=["queue"],
            )
            for name, n in depth.items():
                queues.add_metric([name], n)
            yield queues


def _runs_by_status() -> GaugeMetricFamily:
    """Validation runs by status, from one ``COUNT … GROUP BY status``."""
    from validators_app.models import RunStatus, ValidationRun

    runs = GaugeMetricFamily(
        "aicr_validation_runs",
        "Validation runs by status (queued/running: waiting for or on a validation worker; "
        "publishing: verdict reached, evidence being published).",
        labels=["status"],
    )
    counts = dict(ValidationRun.objects.values_list("status").annotate(n=Count("pk")).order_by())
    for status in RunStatus.values:
        runs.add_metric([status], counts.get(status, 0))
    return runs


def _celery_queue_depth() -> dict[str, int] | None:
    """``LLEN`` of each queue when the broker is Redis (kombu keeps a queue as a list)."""
    from django.conf import settings

    url = getattr(settings, "CELERY_BROKER_URL", "") or ""
    if not url.startswith(("redis://", "rediss://")):
        return None
    import redis

    client = redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1)
    try:
        return {name: int(client.llen(name)) for name in CELERY_QUEUES}
    except redis.RedisError:
        return None
    finally:
        client.close()


REGISTRY.register(DatabaseCollector())


@never_cache
@require_safe
def metrics(request: HttpRequest) -> HttpResponse:
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)
