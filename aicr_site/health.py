"""Operations endpoints, like aicrd's: ``/health`` (the process answers; touches nothing) and
``/ready`` (the database, the Celery broker and the cache answer now). ``/ready`` is 503 when
any of them does not, naming which (``missing``) and why, with ``Retry-After``, so a load
balancer stops sending traffic until they answer; nothing needs restarting when they do."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

BROKER_TIMEOUT_SECONDS = 2


def _database() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return connection.vendor


def _cache() -> str:
    key = f"ready:{uuid.uuid4().hex}"
    cache.set(key, "1", 5)
    ok = cache.get(key) == "1"
    cache.delete(key)
    if not ok:
        raise RuntimeError("a value written to the cache could not be read back")
    backend: str = settings.CACHES["default"]["BACKEND"]
    return backend.rsplit(".", 1)[-1]


def _broker() -> str:
    if getattr(settings, "CELERY_TASK_ALWAYS_EAGER", False):
        return "in-process (no broker configured)"
    from aicr_site.celery import app

    with app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, timeout=BROKER_TIMEOUT_SECONDS)
        return conn.as_uri()  # without the password


CHECKS: dict[str, Callable[[], str]] = {"database": _database, "broker": _broker, "cache": _cache}


@never_cache
@require_safe
def health(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


@never_cache
@require_safe
def ready(request: HttpRequest) -> JsonResponse:
    results: dict[str, dict[str, object]] = {}
    for name, check in CHECKS.items():
        started = time.perf_counter()
        try:
            results[name] = {"ok": True, "detail": check()}
        except Exception as exc:  # any failure at all means "not ready"; it is named below
            results[name] = {"ok": False, "detail": f"{type(exc).__name__}: {str(exc)[:300]}"}
        results[name]["ms"] = round((time.perf_counter() - started) * 1000, 1)
    missing = [name for name, result in results.items() if not result["ok"]]
    body = {"status": "not-ready" if missing else "ready", "missing": missing, "checks": results}
    response = JsonResponse(body, status=503 if missing else 200)
    if missing:
        response["Retry-After"] = str(settings.DB_RETRY_AFTER_SECONDS)
    return response
