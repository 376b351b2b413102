"""The live block of a run page tells each state apart in words and a state class, shows the
progress counted from the run's ``CheckRun`` rows, the wall time elapsed against the budget
(the planned checks' catalog timeouts, summed), and labels a simulated cluster's durations
"simulated" (``services.run_progress``)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
import yaml
from django.test import Client
from django.utils import timezone

from tests.validators_app.runs_support import RECIPE, cluster_row
from validators_app.models import CheckRun, CheckStatus, Environment, RunStatus, ValidationRun
from validators_app.services import runs

pytestmark = pytest.mark.django_db
LIVE = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "run-live"}
POLLING = 'hx-trigger="every 2s"'


def start(django_capture_on_commit_callbacks: Any, environment: str) -> ValidationRun:
    with django_capture_on_commit_callbacks(execute=False):
        return runs.run_start(
            cluster=cluster_row(environment=environment),
            recipe_name=RECIPE,
            phases=["deployment", "conformance"],
        )


def catalog_budget_s(run: ValidationRun) -> int:
    """The budget worked out here from the catalog's own text (every timeout is whole
    minutes in this catalog; AICR's default of 5 minutes where none is given)."""
    doc = yaml.safe_load(run.recipe.catalog.files["validators/catalog.yaml"])
    timeouts = {(e["phase"], e["name"]): e.get("timeout", "5m") for e in doc["validators"]}
    total = 0
    for check in run.checks.all():
        text = timeouts[(check.phase, check.name)]
        assert re.fullmatch(r"\d+m", text), text
        total += int(text[:-1]) * 60
    return total


def put_in_state(run: ValidationRun, state: str) -> None:
    """The rows as the worker leaves them in ``state``: the first check finished (2 simulated
    minutes), the second running while the run runs, every check ended once it ended."""
    now = timezone.now()
    checks = list(run.checks.order_by("position"))
    fields: dict[str, Any] = {"status": state}
    if state != RunStatus.QUEUED:
        fields["started_at"] = now - timedelta(seconds=57)
        CheckRun.objects.filter(pk=checks[0].pk).update(
            status=CheckStatus.PASSED, duration_ms=120_000, finished_at=now
        )
    if state == RunStatus.RUNNING:
        CheckRun.objects.filter(pk=checks[1].pk).update(status=CheckStatus.RUNNING)
        fields.update(phase=checks[1].phase, current_check=checks[1].name)
    elif state == RunStatus.PUBLISHING:
        CheckRun.objects.filter(run=run).exclude(pk=checks[0].pk).update(
            status=CheckStatus.PASSED, duration_ms=300_000
        )
        fields.update(verdict=RunStatus.PASSED, finished_at=now)
    elif state != RunStatus.QUEUED:
        ended = CheckStatus.FAILED if state == RunStatus.FAILED else CheckStatus.PASSED
        CheckRun.objects.filter(run=run).exclude(pk=checks[0].pk).update(
            status=ended if state in (RunStatus.PASSED, RunStatus.FAILED) else CheckStatus.PENDING
        )
        fields["finished_at"] = now
        if state == RunStatus.ERROR:
            fields["error"] = "readiness: no GPU node became ready"
        if state in (RunStatus.PASSED, RunStatus.FAILED):
            fields["publish_error"] = "publishing as evidence failed: PublishError: no site key"
    ValidationRun.objects.filter(pk=run.pk).update(**fields)


# state → words only that state's block says
WORDS = {
    RunStatus.QUEUED: "Queued: waiting for a worker; no check has started yet.",
    RunStatus.RUNNING: "check 2 of",
    RunStatus.PUBLISHING: "All checks ended (passed); publishing the evidence.",
    RunStatus.PASSED: "Finished: passed, not published (the error is below).",
    RunStatus.FAILED: "Finished: failed, not published (the error is below).",
    RunStatus.ERROR: "Ended in error before a verdict.",
    RunStatus.CANCELLED: "Cancelled before a verdict.",
}


@pytest.mark.parametrize("state", list(WORDS))
def test_each_state_renders_distinctly(
    real_catalog: Any, django_capture_on_commit_callbacks: Any, state: str
) -> None:
    run = start(django_capture_on_commit_callbacks, Environment.REAL)
    put_in_state(run, state)

    body = Client().get(f"/runs/{run.pk}/", **LIVE).content.decode()

    assert f'class="card run-live run-live--{state}"' in body
    assert f'data-run-state="{state}"' in body
    assert WORDS[state] in body
    for other, words in WORDS.items():
        if other != state:
            assert words not in body, other
    # Still changing (queued, running, publishing): the block keeps polling, and without
    # JavaScript the page reloads itself; once ended, neither.
    active = state in (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.PUBLISHING)
    assert (POLLING in body) == active
    page = Client().get(f"/runs/{run.pk}/").content.decode()
    assert ('<noscript><meta http-equiv="refresh" content="5"></noscript>' in page) == active


def test_progress_is_counted_from_the_check_rows_against_the_catalog_budget(
    real_catalog: Any, django_capture_on_commit_callbacks: Any
) -> None:
    run = start(django_capture_on_commit_callbacks, Environment.REAL)
    planned = run.checks.count()
    assert planned >= 3
    put_in_state(run, RunStatus.RUNNING)
    second = run.checks.get(position=1)

    body = Client().get(f"/runs/{run.pk}/", **LIVE).content.decode()

    assert f'<progress id="run-progress-bar" max="{planned}" value="1">' in body
    assert (
        f"<strong data-progress-done>1</strong> of <strong data-progress-planned>{planned}" in body
    )
    assert f"Running <code>{second.phase}/{second.name}</code>: check 2 of {planned}." in body
    # A pending check and the running one are styled apart (outline vs filled chip).
    assert body.count("check-status--running") == 1
    assert body.count("check-status--pending") == planned - 2
    budget = catalog_budget_s(run)
    hours, rest = divmod(budget, 3600)
    shown = f"{hours}h {rest // 60}m 0s" if hours else f"{rest // 60}m 0s"
    assert f"<span data-budget>{shown}</span> budget" in body
    assert re.search(r"<dd data-elapsed>5\ds <span class=\"muted\">wall time</span>", body)
    assert "simulated" not in body.lower().replace("simulated (test double", "")  # a real cluster

    CheckRun.objects.filter(run=run).update(status=CheckStatus.PASSED)  # all done
    body = Client().get(f"/runs/{run.pk}/", **LIVE).content.decode()
    assert f'max="{planned}" value="{planned}"' in body


def test_a_simulated_clusters_durations_are_labelled_simulated_not_wall_time(
    real_catalog: Any, django_capture_on_commit_callbacks: Any
) -> None:
    run = start(django_capture_on_commit_callbacks, Environment.SIMULATED)
    put_in_state(run, RunStatus.PUBLISHING)
    others = run.checks.count() - 1

    body = Client().get(f"/runs/{run.pk}/").content.decode()

    # 2 simulated minutes + 5 for each other check, against 57 s of wall time.
    total_s = 120 + 300 * others
    minutes = (
        f"{total_s // 3600}h {total_s % 3600 // 60}m 0s"
        if total_s >= 3600
        else f"{total_s // 60}m 0s"
    )
    check_time = re.search(r"<dd data-simulated-time>(.*?)</dd>", body, re.S)
    assert check_time is not None
    assert check_time.group(1).startswith(
        f'{minutes} <span class="badge badge--simulated">simulated'
    )
    assert "not wall time" in check_time.group(1)
    assert re.search(r"<dd data-elapsed>5\ds <span class=\"muted\">wall time", body)
    assert 'Duration <span class="muted">(simulated)</span>' in body
    assert body.count('2m 0s <span class="muted">simulated</span>') == 1
