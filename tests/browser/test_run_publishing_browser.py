"""A finished run's page keeps refreshing while its evidence is being published and shows the
outcome once the row that records it is committed: here the publish step is held on an event
(the real ``run_finish`` → ``run_publish`` path on a worker thread) and then fails, so the page
must move from "publishing" to "passed" with the publish error, and stop polling."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection
from playwright.sync_api import expect

from tests.validators_app.runs_support import RECIPE, cluster_row, passed_outcome
from validators_app.models import RunStatus, ValidationRun
from validators_app.services import runs
from validators_app.services.evidence import PublishError

pytestmark = pytest.mark.browser
REASON = "the site has no signing key"


def test_the_run_page_polls_until_publishing_ends(
    page: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runs, "_enqueue", lambda run_pk: None)  # the thread below is the worker
    release = threading.Event()

    def publish_when_released(run: ValidationRun) -> None:
        assert release.wait(timeout=60), "the test never released the publish step"
        raise PublishError(REASON)

    monkeypatch.setattr("validators_app.services.evidence.publish_run", publish_when_released)
    run = runs.run_start(cluster=cluster_row(), recipe_name=RECIPE, phases=["deployment"])
    claim = runs.run_claim(run_id=run.pk)
    assert claim is not None
    finished = passed_outcome(run)
    planned = run.checks.count()

    def work() -> None:
        try:
            runs.run_finish(claim=claim, outcome=finished)
        finally:
            connection.close()

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    try:
        page.goto(f"/runs/{run.pk}/")
        status = page.locator("[data-run-status]")
        # The verdict is stored but not yet shown as the status: the evidence is on its way.
        expect(status).to_have_text("publishing", timeout=15_000)
        expect(page.locator("[data-run-publishing]")).to_contain_text("publishing the evidence")
        expect(page.locator("#run-live")).to_have_attribute("hx-trigger", "every 2s")
        expect(page.locator("progress")).to_have_attribute("value", str(planned))
        assert ValidationRun.objects.get(pk=run.pk).status == RunStatus.PUBLISHING
    finally:
        release.set()
    worker.join(timeout=30)
    assert ValidationRun.objects.get(pk=run.pk).status == RunStatus.PASSED

    # The poll picked the end up by itself (no reload from the test), then the page reloaded
    # once to show the results, and nothing polls any more.
    expect(status).to_have_text("passed", timeout=15_000)
    expect(page.locator(".run-live--passed")).to_contain_text("not published (the error is below)")
    expect(page.locator("#run-live [role=note]")).to_contain_text(REASON)
    expect(page.locator("#results-h")).to_be_visible()
    assert page.locator("[hx-trigger]").count() == 0


def test_without_javascript_the_run_page_reloads_until_the_run_ends(
    open_page: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runs, "_enqueue", lambda run_pk: None)  # stays queued: no worker
    run = runs.run_start(cluster=cluster_row(), recipe_name=RECIPE, phases=["deployment"])
    page = open_page(java_script_enabled=False, viewport={"width": 390, "height": 844})
    page.goto(f"/runs/{run.pk}/")
    status = page.locator("[data-run-status]")
    expect(status).to_have_text("queued")
    expect(page.locator("progress")).to_have_attribute("value", "0")

    runs.run_cancel(run=run)  # a queued run is cancelled at once

    expect(status).to_have_text("cancelled", timeout=15_000)  # the <noscript> reload
    expect(page.locator(".run-live--cancelled")).to_contain_text("Cancelled before a verdict.")
    assert page.locator("noscript").count() == 0
