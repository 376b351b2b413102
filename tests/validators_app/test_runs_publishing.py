"""A run's verdict and its evidence (or publish error) become visible together: ``publishing``.

The publisher is replaced by one that looks at the database *while it runs* (from a second
connection on PostgreSQL, the same one on SQLite): what a client would see mid-publish.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from evidence_app.models import Role
from evidence_app.services.tokens import user_with_role
from tests.validators_app.runs_support import passed_outcome
from tests.validators_app.test_runs_services import _queued
from validators_app.models import RunStatus, ValidationRun
from validators_app.services import evidence, runs

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fast_settings(settings: Any) -> None:
    settings.VALIDATION_HEARTBEAT_STALE_SECONDS = 60
    settings.VALIDATION_MAX_ATTEMPTS = 2


def _publisher(monkeypatch: Any, publish: Any) -> None:
    # The attribute, not the module: a stand-in module in sys.modules broke the URLconf's own
    # imports of it when this file ran alone (its first request loads the URLconf).
    monkeypatch.setattr(evidence, "publish_run", publish)


def test_while_publishing_the_run_is_publishing_everywhere_then_passed_with_its_outcome(
    real_catalog: Any, django_capture_on_commit_callbacks: Any, monkeypatch: Any
) -> None:
    seen: dict[str, Any] = {}
    viewer = user_with_role(username="auditor", role=Role.AUDITOR)
    client = Client()
    client.force_login(viewer)

    def publish(run: ValidationRun) -> None:
        stored = ValidationRun.objects.get(pk=run.pk)
        seen["status"], seen["verdict"] = stored.status, stored.verdict
        api = client.get(reverse("api:run-detail", args=[run.pk]))
        seen["api"] = api.json()
        seen["ctrf"] = client.get(reverse("api:run-ctrf", args=[run.pk]))
        seen["page"] = client.get(reverse("runs:detail", args=[run.pk])).content.decode()
        seen["filtered"] = client.get(reverse("api:run-list"), {"status": "publishing"}).json()
        with pytest.raises(runs.RunCancelError, match="its evidence is being published"):
            runs.run_cancel(run=stored)
        raise RuntimeError("the evidence store is down")

    _publisher(monkeypatch, publish)
    run = _queued(django_capture_on_commit_callbacks, phases=["deployment"])
    claim = runs.run_claim(run_id=run.pk)
    assert claim is not None
    finished = runs.run_finish(claim=claim, outcome=passed_outcome(run))

    assert (seen["status"], seen["verdict"]) == (RunStatus.PUBLISHING, RunStatus.PASSED)
    assert seen["api"]["status"] == "publishing"
    assert (seen["api"]["evidence"], seen["api"]["publish_error"]) == (None, "")
    assert seen["api"]["ctrf_url"] is None
    assert seen["ctrf"].status_code == 404
    assert "is publishing its evidence" in seen["ctrf"].json()["detail"]
    page = seen["page"]
    assert "All checks ended (passed); publishing the evidence." in page
    assert "hx-trigger=" in page  # the page keeps refreshing
    assert "Not published as evidence" not in page
    assert [r["id"] for r in seen["filtered"]["results"]] == [run.pk]

    # The verdict and the publish error arrive in one commit.
    assert finished is not None
    run.refresh_from_db()
    assert (run.status, run.verdict) == (RunStatus.PASSED, RunStatus.PASSED)
    assert run.publish_error == (
        "publishing as evidence failed: RuntimeError: the evidence store is down"
    )
    assert finished.status == RunStatus.PASSED
    page = client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert "Not published as evidence" in page
    assert "hx-trigger=" not in page


def test_a_publishing_run_does_not_hold_its_cluster(
    real_catalog: Any, django_capture_on_commit_callbacks: Any, monkeypatch: Any
) -> None:
    started: list[int] = []

    def publish(run: ValidationRun) -> None:
        again = runs.run_start(cluster=run.cluster, recipe_name=run.recipe.name)
        started.append(again.pk)

    _publisher(monkeypatch, publish)
    run = _queued(django_capture_on_commit_callbacks, phases=["deployment"])
    claim = runs.run_claim(run_id=run.pk)
    assert claim is not None
    runs.run_finish(claim=claim, outcome=passed_outcome(run))
    assert len(started) == 1
    assert ValidationRun.objects.get(pk=started[0]).status == RunStatus.QUEUED


def test_a_run_left_publishing_by_a_dead_worker_is_published_again_by_the_reaper(
    real_catalog: Any, django_capture_on_commit_callbacks: Any, monkeypatch: Any
) -> None:
    from validators_app import tasks

    class WorkerDied(BaseException):
        """What a SIGKILL mid-publish leaves: nothing after this point runs."""

    def dies(run: ValidationRun) -> None:
        raise WorkerDied

    _publisher(monkeypatch, dies)
    run = _queued(django_capture_on_commit_callbacks, phases=["deployment"])
    claim = runs.run_claim(run_id=run.pk)
    assert claim is not None
    with pytest.raises(WorkerDied):
        runs.run_finish(claim=claim, outcome=passed_outcome(run))
    run.refresh_from_db()
    assert (run.status, run.verdict, run.evidence_id) == ("publishing", "passed", None)
    finished_at = run.finished_at

    sent: list[int] = []
    monkeypatch.setattr(tasks.run_publish, "delay", sent.append)
    assert runs.runs_reap() == []  # its heartbeat is fresh: maybe still publishing
    ValidationRun.objects.filter(pk=run.pk).update(
        heartbeat_at=timezone.now() - timedelta(minutes=5)
    )
    assert runs.runs_reap() == [run.pk]
    assert sent == [run.pk]
    assert runs.runs_reap() == []  # sent once per stale interval, not every pass

    published: list[Any] = []

    def works(run: ValidationRun) -> None:
        published.append((run.status, run.outcome_status, run.finished_at))

    _publisher(monkeypatch, works)
    assert tasks.run_publish(run.pk) == RunStatus.PASSED
    # The bundle is built from the same run (same finish time): the same evidence.
    assert published == [(RunStatus.PUBLISHING, RunStatus.PASSED, finished_at)]
    run.refresh_from_db()
    assert (run.status, run.publish_error) == (RunStatus.PASSED, "")
    assert tasks.run_publish(run.pk) is None  # nothing left to publish
