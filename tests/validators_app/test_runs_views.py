"""The run pages: public reads, live partial, hostile logs escaped and bounded, maintainer-only
cancel and "Validate on…" (the form is not even shown to others)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from evidence_app.models import Role
from evidence_app.services.tokens import user_with_role
from tests.validators_app.runs_support import RECIPE, cluster_row, outcome, publish_nothing
from validators_app import orchestrator
from validators_app.models import RunStatus, ValidationRun
from validators_app.services import runs

pytestmark = pytest.mark.django_db
HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'
LIVE = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "run-live"}


def signed_in(role: str) -> Client:
    client = Client()
    client.force_login(user_with_role(username=f"{role}-page-user", role=role))
    return client


@pytest.fixture
def queued(real_catalog: Any, django_capture_on_commit_callbacks: Any) -> ValidationRun:
    with django_capture_on_commit_callbacks(execute=False):
        return runs.run_start(cluster=cluster_row(), recipe_name=RECIPE, phases=["deployment"])


def finish_failed(run: ValidationRun, monkeypatch: Any) -> ValidationRun:
    publish_nothing(monkeypatch)
    claim = runs.run_claim(run_id=run.pk)
    names = list(run.checks.values_list("name", flat=True))
    hostile = orchestrator.CheckOutcome(
        phase="deployment",
        name=names[0],
        status="failed",
        exit_code=1,
        message=f"[INTERNAL] {HOSTILE}",
        duration_ms=3000,
        stdout=tuple(f"line {i} {HOSTILE}" for i in range(1000)),
        extra={},
        job_name="aicr-x-00000000",
    )
    runs.run_finish(
        claim=claim,
        outcome=orchestrator.RunOutcome(
            status="failed",
            error="",
            snapshot_yaml="kind: Snapshot\n",
            phase_reports={"deployment": b"{}\n"},
            merged_report=b"{}\n",
            checks=(hostile, *(outcome("deployment", n, "passed") for n in names[1:])),
        ),
    )
    return ValidationRun.objects.get(pk=run.pk)


def test_anyone_sees_the_list_and_a_live_active_run(queued: ValidationRun) -> None:
    listing = Client().get("/runs/")
    assert listing.status_code == 200
    assert f'data-run="{queued.pk}"' in listing.content.decode()
    assert "SIMULATED" in listing.content.decode()

    page = Client().get(f"/runs/{queued.pk}/").content.decode()
    assert 'hx-trigger="every 2s"' in page
    assert "SIMULATED" in page
    assert "Cancel run" not in page  # not a maintainer
    partial = Client().get(f"/runs/{queued.pk}/", **LIVE)
    assert partial.status_code == 200
    body = partial.content.decode()
    assert body.lstrip().startswith('<section id="run-live"')
    assert "<html" not in body
    assert "HX-Refresh" not in partial


def test_a_finished_run_stops_polling_and_escapes_and_bounds_hostile_logs(
    queued: ValidationRun, monkeypatch: Any
) -> None:
    run = finish_failed(queued, monkeypatch)
    assert run.status == RunStatus.FAILED
    partial = Client().get(f"/runs/{run.pk}/", **LIVE)
    assert partial["HX-Refresh"] == "true"  # one reload, then no more polls
    page = Client().get(f"/runs/{run.pk}/").content.decode()
    assert "hx-trigger" not in page
    assert "<script>alert" not in page
    assert "<img src=x" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    assert "line 999 " in page
    assert "line 799 " not in page  # only the last 200 lines of a check's log
    assert "line 800 " in page
    assert f"/api/v1/runs/{run.pk}/ctrf.json" in page


@pytest.mark.parametrize(("role", "status"), [(None, 302), (Role.CONTRIBUTOR, 403)])
def test_only_maintainers_cancel(queued: ValidationRun, role: str | None, status: int) -> None:
    client = signed_in(role) if role else Client()
    response = client.post(f"/runs/{queued.pk}/cancel/")
    assert response.status_code == status
    queued.refresh_from_db()
    assert queued.status == RunStatus.QUEUED


def test_a_maintainer_cancels_from_the_page(queued: ValidationRun) -> None:
    maintainer = signed_in(Role.MAINTAINER)
    assert "Cancel run" in maintainer.get(f"/runs/{queued.pk}/").content.decode()
    response = maintainer.post(f"/runs/{queued.pk}/cancel/")
    assert response.status_code == 302
    assert response["Location"] == f"/runs/{queued.pk}/"
    queued.refresh_from_db()
    assert queued.status == RunStatus.CANCELLED
    again = maintainer.post(f"/runs/{queued.pk}/cancel/")  # finished: says so, no 500
    assert again.status_code == 409
    assert "already finished (cancelled)" in again.content.decode()
    assert Client().post("/runs/999999/cancel/").status_code == 302
    assert maintainer.post("/runs/999999/cancel/").status_code == 404


def test_validate_on_is_shown_only_to_maintainers(real_catalog: Any) -> None:
    cluster = cluster_row(name="lab-sim")
    url = f"/recipes/{RECIPE}/"
    for client in (Client(), signed_in(Role.CONTRIBUTOR)):
        assert "Validate on" not in client.get(url).content.decode()
    page = signed_in(Role.MAINTAINER).get(url).content.decode()
    assert "Validate on" in page
    assert f'<option value="{cluster.pk}">lab-sim (SIMULATED)</option>' in page


def test_a_maintainer_starts_a_run_from_the_recipe_page(
    real_catalog: Any, django_capture_on_commit_callbacks: Any
) -> None:
    cluster = cluster_row()
    maintainer = signed_in(Role.MAINTAINER)
    form = {"recipe": RECIPE, "cluster": cluster.pk, "phases": ["conformance", "deployment"]}
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = maintainer.post("/runs/start/", form)
        busy = maintainer.post("/runs/start/", form)
    run = ValidationRun.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/runs/{run.pk}/"
    assert run.phases == ["conformance", "deployment"]
    assert len(callbacks) == 1
    assert busy.status_code == 409
    assert f"/runs/{run.pk}/" in busy.content.decode()


@pytest.mark.parametrize(
    ("form", "fragment"),
    [
        ({"recipe": RECIPE, "cluster": "nope"}, "Choose a registered cluster."),
        ({"recipe": "a/b<script>", "cluster": "CLUSTER"}, "no recipe named"),
        ({"recipe": RECIPE, "cluster": "CLUSTER", "phases": ["bogus"]}, "unknown phase"),
    ],
)
def test_bad_start_forms_are_400s(real_catalog: Any, form: dict, fragment: str) -> None:
    cluster = cluster_row()
    if form["cluster"] == "CLUSTER":
        form = {**form, "cluster": cluster.pk}
    response = signed_in(Role.MAINTAINER).post("/runs/start/", form)
    assert response.status_code == 400
    assert fragment in response.content.decode()
    assert "<script>" not in response.content.decode()
    assert not ValidationRun.objects.exists()


def test_others_cannot_start(real_catalog: Any) -> None:
    form = {"recipe": RECIPE, "cluster": cluster_row().pk}
    assert Client().post("/runs/start/", form).status_code == 302
    assert signed_in(Role.AUDITOR).post("/runs/start/", form).status_code == 403
    assert not ValidationRun.objects.exists()


def test_the_live_block_shows_the_log_tail_of_the_last_finished_check(
    queued: ValidationRun,
) -> None:
    claim = runs.run_claim(run_id=queued.pk)
    hooks = runs.DbRunHooks(claim)
    first, second = list(queued.checks.all()[:2])
    hooks.check_started(first.phase, first.name, "aicr-a")
    hooks.check_finished(
        orchestrator.CheckOutcome(
            phase=first.phase,
            name=first.name,
            status="passed",
            exit_code=0,
            message="",
            duration_ms=2000,
            stdout=tuple(f"tail {i} {HOSTILE}" for i in range(100)),
            extra={},
            job_name="aicr-a",
        )
    )
    hooks.check_started(second.phase, second.name, "aicr-b")
    body = Client().get(f"/runs/{queued.pk}/", **LIVE).content.decode()
    assert f"Log tail of <code>{first.name}</code>" in body
    assert "tail 99 " in body
    assert "tail 59 " not in body  # the last 40 lines
    assert "<script>alert" not in body
    assert f"<code>{second.name}</code>" in body  # the check running now
    assert 'data-status="running"' in body
