"""The scale-out deployment across hosts and through faults (tests/deploy/deployment.py)."""

from __future__ import annotations

from typing import Any

from tests.aicr_site.test_request_guards import ROUTE_PATHS


def test_it_started_in_any_order_and_named_what_was_missing(deployment: Any) -> None:
    early = deployment.early_ready
    assert early.status == 503
    assert early.headers.get("Retry-After")
    assert set(early.json()["missing"]) >= {"database", "broker"}
    for name in ("worker1", "worker2"):
        log = deployment.host(name).log_text("worker")
        assert "waiting for the database (attempt 1)" in log, log[-2000:]
    assert "waiting for the broker (attempt 1)" in deployment.host("beat").log_text("beat")


def test_every_page_answers_through_nginx(deployment: Any) -> None:
    answers = {path: deployment.request(path) for path in ROUTE_PATHS}
    errors = {
        p: (a.status, a.body[:200]) for p, a in answers.items() if a.status >= 500 or a.status == 0
    }
    assert errors == {}
    for path in ("/", "/recipes/", "/evidence/", "/runs/", "/qualifications/", "/api/v1/recipes/"):
        assert answers[path].status == 200, (path, answers[path].status)
