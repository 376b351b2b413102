"""How far a run has got, for its live page: checks done of those planned, the check running,
and the time taken against the run's budget.

The budget is the sum of the planned checks' catalog timeouts (``timeout`` in
``validators/catalog.yaml``, AICR's 300 s default where a check names none): each validator Job
gets that as its ``activeDeadlineSeconds`` (AICR ``pkg/validator/v1/job.go``), so a run that
takes longer than the budget has spent more than every check was allowed. A planned check the
catalog lacks adds nothing: the orchestrator's pre-flight ends such a run before any Job.

On a simulated cluster the check durations come from the simulator's container timestamps,
which advance in simulated time, while ``elapsed`` is wall time on this site's clock: the page
labels the former "simulated" instead of letting the two contradict each other.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.utils import timezone

from validators_app.models import CheckRun, CheckStatus, ValidationRun
from validators_app.orchestrator.plan import catalog_entries
from validators_app.services.runs import validator_catalog


@dataclass(frozen=True)
class RunProgress:
    planned: int
    done: int
    current_check: str
    elapsed_s: float | None  # wall time since the worker started it; None while queued
    budget_s: int
    checks_s: float  # the finished checks' reported durations, summed
    simulated: bool  # durations are the simulator's, not wall time

    @property
    def percent(self) -> int:
        return round(100 * self.done / self.planned) if self.planned else 0

    @property
    def over_budget(self) -> bool:
        return self.elapsed_s is not None and self.budget_s > 0 and self.elapsed_s > self.budget_s


def budget_seconds(run: ValidationRun, checks: list[CheckRun]) -> int:
    """Sum of the catalog deadlines of ``checks`` (the run's planned ``CheckRun`` rows)."""
    deadlines = {
        (entry.phase, entry.name): entry.deadline_s
        for entry in catalog_entries(validator_catalog(run.recipe))
    }
    return sum(deadlines.get((check.phase, check.name), 0) for check in checks)


def run_progress(run: ValidationRun, checks: list[CheckRun]) -> RunProgress:
    """``checks``: the run's ``CheckRun`` rows (already fetched for the page)."""
    end = run.finished_at or timezone.now()
    return RunProgress(
        planned=len(checks),
        done=sum(check.is_finished for check in checks),
        current_check=next(
            (f"{c.phase}/{c.name}" for c in checks if c.status == CheckStatus.RUNNING),
            run.current_check,
        ),
        elapsed_s=(end - run.started_at).total_seconds() if run.started_at else None,
        budget_s=budget_seconds(run, checks),
        checks_s=sum(check.duration_ms or 0 for check in checks) / 1000,
        simulated=run.cluster.is_simulated,
    )
