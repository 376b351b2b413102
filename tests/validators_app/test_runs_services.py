"""services.runs: start, claim (fenced by attempt), hooks, finish, cancel and the reaper."""

from __future__ import annotations

import re
import sys
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from django.utils import timezone

from recipes_app.models import Recipe
from tests.validators_app.runs_support import RECIPE, cluster_row, outcome
from validators_app import orchestrator
from validators_app.models import CheckRun, CheckStatus, RunStatus, ValidationRun
from validators_app.services import runs

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fast_settings(settings: Any) -> None:
    settings.VALIDATION_HEARTBEAT_STALE_SECONDS = 60
    settings.VALIDATION_MAX_ATTEMPTS = 2


def start(cluster: Any = None, phases: Any = None, capture: Any = None) -> ValidationRun:
    return runs.run_start(cluster=cluster or cluster_row(), recipe_name=RECIPE, phases=phases)


def test_it_queues_a_run_with_pending_checks_in_catalog_order(
    real_catalog: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run = start(phases=["conformance", "deployment", "conformance"])
    assert len(callbacks) == 1  # enqueued once, after commit
    assert run.status == RunStatus.QUEUED
    assert run.phases == ["conformance", "deployment"]
    assert re.fullmatch(r"[0-9]{8}-[0-9]{6}-[0-9a-f]{16}", run.aicr_run_id)
    recipe = Recipe.objects.current().get(name=RECIPE)
    declared = {
        phase: {c["name"] for c in recipe.checks.get(phase, [])} for phase in ("conformance",)
    }
    rows = list(run.checks.values_list("phase", "name", "status"))
    assert {name for phase, name, _ in rows if phase == "conformance"} == declared["conformance"]
    assert all(status == CheckStatus.PENDING for *_, status in rows)
    # Phases in the user's order; in a phase, the catalog's (FilterEntriesByValidation).
    phases_seen = [phase for phase, _, _ in rows]
    assert phases_seen == sorted(phases_seen, key=["conformance", "deployment"].index)
    catalog = [
        e["name"]
        for e in runs.validator_catalog(recipe)["validators"]
        if e["phase"] == "conformance"
    ]
    names = [name for phase, name, _ in rows if phase == "conformance"]
    assert names == sorted(names, key=catalog.index)


@pytest.mark.parametrize(
    ("phases", "fragment"),
    [
        ("deployment", "must be a list"),
        (["deployment", 3], "only phase names"),
        (["readiness"], "unknown phase 'readiness'"),
        (["all", "deployment"], '"all" cannot be combined'),
    ],
)
def test_it_names_bad_phases(real_catalog: Any, phases: Any, fragment: str) -> None:
    with pytest.raises(runs.RunStartError) as exc:
        start(phases=phases)
    assert exc.value.field == "phases"
    assert fragment in exc.value.message
    assert not ValidationRun.objects.exists()


def test_all_and_none_mean_the_default_order() -> None:
    assert runs.phases_parse(None) == runs.phases_parse(["all"]) == runs.phases_parse([])
    assert runs.phases_parse(None) == ("deployment", "conformance", "performance")


def test_it_refuses_an_unknown_recipe(real_catalog: Any) -> None:
    with pytest.raises(runs.RunStartError) as exc:
        runs.run_start(cluster=cluster_row(), recipe_name="no-such-recipe")
    assert (exc.value.field, exc.value.code) == ("recipe", "invalid")
    assert "no recipe named 'no-such-recipe'" in exc.value.message


def test_one_active_run_per_cluster(
    real_catalog: Any, django_capture_on_commit_callbacks: Any
) -> None:
    cluster = cluster_row()
    with django_capture_on_commit_callbacks(execute=False):
        first = start(cluster)
        with pytest.raises(runs.RunStartError) as exc:
            start(cluster)
        assert exc.value.code == "conflict"
        assert exc.value.active_run == first
        assert f"#{first.pk}" in exc.value.message
        start(cluster_row())  # another cluster is free
        runs.run_cancel(run=first)
        again = start(cluster)  # a finished run frees the cluster
    assert again.status == RunStatus.QUEUED
    assert ValidationRun.objects.filter(cluster=cluster).count() == 2


def _queued(django_capture_on_commit_callbacks: Any, **kw: Any) -> ValidationRun:
    with django_capture_on_commit_callbacks(execute=False):
        return start(**kw)


def test_claim_is_conditional_and_a_takeover_fences_the_old_worker(
    real_catalog: Any, django_capture_on_commit_callbacks: Any
) -> None:
    run = _queued(django_capture_on_commit_callbacks)
    claim = runs.run_claim(run_id=run.pk)
    assert claim is not None
    assert claim.attempt == 1
    assert runs.run_claim(run_id=run.pk) is None  # its worker is alive: nothing to take
    hooks = runs.DbRunHooks(claim)
    first = run.checks.first()
    hooks.phase_started(first.phase)
    hooks.check_started(first.phase, first.name, "aicr-x-1")
    assert CheckRun.objects.get(pk=first.pk).status == CheckStatus.RUNNING

    # The worker goes silent; the next claim takes the run over and resumes it.
    ValidationRun.objects.filter(pk=run.pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=61)
    )
    takeover = runs.run_claim(run_id=run.pk)
    assert takeover is not None
    assert takeover.attempt == 2
    assert takeover.run.started_at == ValidationRun.objects.get(pk=run.pk).started_at
    hooks._last_beat = 0.0  # its next heartbeat is due (they are throttled)
    with pytest.raises(runs.ClaimLost):
        hooks.heartbeat()
    with pytest.raises(runs.ClaimLost):
        hooks.check_finished(outcome(first.phase, first.name, "passed"))
    assert CheckRun.objects.get(pk=first.pk).status == CheckStatus.RUNNING
    assert runs.run_finish(claim=claim, outcome=_passed()) is None  # the old worker's finish


def test_a_resumed_spec_carries_the_snapshot_and_the_finished_checks(
    real_catalog: Any, django_capture_on_commit_callbacks: Any
) -> None:
    run = _queued(django_capture_on_commit_callbacks, phases=["deployment"])
    claim = runs.run_claim(run_id=run.pk)
    hooks = runs.DbRunHooks(claim)
    hooks.snapshot_taken("kind: Snapshot\n", "ghcr.io/nvidia/aicr:latest", "")
    done, in_flight = list(run.checks.all()[:2])
    hooks.check_started(done.phase, done.name, "aicr-a")
    hooks.check_finished(outcome(done.phase, done.name, "failed", message="[NOT_FOUND] x"))
    hooks.check_started(in_flight.phase, in_flight.name, "aicr-b")
    spec = runs.spec_for(ValidationRun.objects.get(pk=run.pk))
    assert spec.snapshot_yaml == "kind: Snapshot\n"
    assert spec.run_id == run.aicr_run_id
    assert spec.phases == ("deployment",)
    assert [c.name for c in spec.completed] == [done.name]
    assert spec.completed[0] == outcome(done.phase, done.name, "failed", message="[NOT_FOUND] x")
    assert spec.recipe == yaml.safe_load(run.recipe.canonical_yaml)
    assert spec.validator_catalog["kind"] == "ValidatorCatalog"


def test_the_attempt_cap_ends_a_run_in_error_with_the_reason(
    real_catalog: Any, django_capture_on_commit_callbacks: Any
) -> None:
    run = _queued(django_capture_on_commit_callbacks)
    for _ in range(2):
        claim = runs.run_claim(run_id=run.pk)
        assert claim is not None
        runs.DbRunHooks(claim).check_started("deployment", run.checks.first().name, "aicr-j")
        ValidationRun.objects.filter(pk=run.pk).update(
            heartbeat_at=timezone.now() - timedelta(minutes=5)
        )
    assert runs.run_claim(run_id=run.pk) is None
    run.refresh_from_db()
    assert run.status == RunStatus.ERROR
    assert "stopped during deployment/" in run.error
    assert "tried 2 time(s)" in run.error
    check = run.checks.first()
    assert check.status == CheckStatus.OTHER
    assert "before this check finished" in check.message


def _passed() -> orchestrator.RunOutcome:
    return orchestrator.RunOutcome(
        status="passed",
        error="",
        snapshot_yaml="kind: Snapshot\n",
        phase_reports={"deployment": b'{"a": "\\u003c\xe2\x86\x92"}\n'},
        merged_report=b'{"merged": true}\n',
        checks=(),
    )


def test_finish_stores_the_reports_byte_for_byte_and_records_a_publish_failure(
    real_catalog: Any, django_capture_on_commit_callbacks: Any, monkeypatch: Any
) -> None:
    def broken(run: ValidationRun) -> None:
        raise RuntimeError("signing key missing")

    # Fault injection: EVIDENCE's publisher fails; the run keeps its verdict and says why.
    monkeypatch.setitem(
        sys.modules, "validators_app.services.evidence", SimpleNamespace(publish_run=broken)
    )
    run = _queued(django_capture_on_commit_callbacks, phases=["deployment"])
    claim = runs.run_claim(run_id=run.pk)
    names = list(run.checks.values_list("name", flat=True))
    result = orchestrator.RunOutcome(
        status="failed",
        error="",
        snapshot_yaml="kind: Snapshot\n",
        phase_reports={"deployment": b'{"a": "\\u003c\xe2\x86\x92"}\n'},
        merged_report=b'{"merged": true}\n',
        checks=(
            outcome("deployment", names[0], "failed", message="<script>x</script>"),
            *(outcome("deployment", n, "passed") for n in names[1:]),
        ),
    )
    finished = runs.run_finish(claim=claim, outcome=result)
    assert finished is not None
    run = ValidationRun.objects.get(pk=run.pk)
    assert run.status == RunStatus.FAILED
    assert bytes(run.ctrf) == b'{"merged": true}\n'
    assert run.phase_report_bytes() == {"deployment": b'{"a": "\\u003c\xe2\x86\x92"}\n'}
    assert run.publish_error == "publishing as evidence failed: RuntimeError: signing key missing"
    assert run.evidence is None
    assert run.finished_at is not None
    first = run.checks.get(name=names[0])
    assert (first.status, first.exit_code, first.message) == ("failed", 1, "<script>x</script>")
    assert first.stdout[1] == "<b>log</b>"


def test_an_error_outcome_keeps_no_ctrf(
    real_catalog: Any, django_capture_on_commit_callbacks: Any
) -> None:
    run = _queued(django_capture_on_commit_callbacks)
    claim = runs.run_claim(run_id=run.pk)
    message = "readiness check failed: K8s.server.version expected >= 1.34, got v1.30.2"
    result = orchestrator.RunOutcome(
        status="error",
        error=message,
        snapshot_yaml="kind: Snapshot\n",
        phase_reports={"deployment": b"{}\n"},
        merged_report=b"{}\n",
    )
    runs.run_finish(claim=claim, outcome=result)
    run.refresh_from_db()
    assert (run.status, run.error, run.ctrf, run.phase_reports) == ("error", message, None, {})
    assert set(run.checks.values_list("status", flat=True)) == {CheckStatus.PENDING}


def test_cancel(real_catalog: Any, django_capture_on_commit_callbacks: Any) -> None:
    queued = _queued(django_capture_on_commit_callbacks)
    assert runs.run_cancel(run=queued).status == RunStatus.CANCELLED
    with pytest.raises(runs.RunCancelError, match="already finished"):
        runs.run_cancel(run=queued)

    running = _queued(django_capture_on_commit_callbacks)
    claim = runs.run_claim(run_id=running.pk)
    hooks = runs.DbRunHooks(claim)
    assert hooks.cancel_requested() is False
    cancelled = runs.run_cancel(run=running)
    assert (cancelled.status, cancelled.cancel_requested) == (RunStatus.RUNNING, True)
    hooks._last_cancel_check = 0.0
    assert hooks.cancel_requested() is True


def test_the_reaper_requeues_dead_and_lost_runs(
    real_catalog: Any, django_capture_on_commit_callbacks: Any, monkeypatch: Any
) -> None:
    sent: list[int] = []
    monkeypatch.setattr(runs, "_enqueue", sent.append)
    live = _queued(django_capture_on_commit_callbacks)
    runs.run_claim(run_id=live.pk)
    dead = _queued(django_capture_on_commit_callbacks)
    runs.run_claim(run_id=dead.pk)
    ValidationRun.objects.filter(pk=dead.pk).update(
        heartbeat_at=timezone.now() - timedelta(minutes=2)
    )
    fresh_queued = _queued(django_capture_on_commit_callbacks)
    lost = _queued(django_capture_on_commit_callbacks)
    ValidationRun.objects.filter(pk=lost.pk).update(enqueued_at=timezone.now() - timedelta(hours=1))
    assert sorted(runs.runs_reap()) == sorted([dead.pk, lost.pk])
    assert sorted(sent) == sorted([dead.pk, lost.pk])
    assert fresh_queued.pk not in sent
    # The re-sent run is taken over by the next claim, which resumes it.
    claim = runs.run_claim(run_id=dead.pk)
    assert claim is not None
    assert claim.attempt == 2


def test_a_broker_outage_does_not_fail_the_start_and_the_reaper_sends_it_later(
    real_catalog: Any, django_capture_on_commit_callbacks: Any, monkeypatch: Any
) -> None:
    from validators_app import tasks

    def down(*args: Any) -> None:
        raise ConnectionRefusedError("redis is down")

    monkeypatch.setattr(tasks.run_execute, "delay", down)
    with django_capture_on_commit_callbacks(execute=True):
        run = start()
    run.refresh_from_db()
    assert (run.status, run.enqueued_at) == (RunStatus.QUEUED, None)

    sent: list[int] = []
    monkeypatch.setattr(tasks.run_execute, "delay", sent.append)
    assert runs.runs_reap() == [run.pk]  # at once, not after VALIDATION_REQUEUE_QUEUED_SECONDS
    assert sent == [run.pk]
    run.refresh_from_db()
    assert run.enqueued_at is not None
