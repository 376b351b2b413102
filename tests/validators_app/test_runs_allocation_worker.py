"""End to end with a real Celery worker (PostgreSQL, Redis, the simulated cluster): a run whose
recipe carries a contradictory GPU allocation configuration ends ``error`` with AICR's message
before any validator Job exists, with no CTRF and no evidence.

Such a run cannot be started today (the start answers 400), so the run is queued as a site that
did not check at start would have queued it: ``recipe_input_problem`` is switched off in this
process only. The worker is another process running the unchanged code, and must fail closed on
its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from recipes_app.models import Recipe
from tests.k8s_sim import SCENARIOS, SimulatedCluster
from tests.validators_app.allocation_support import CHART_GUARD, contradictory_catalog
from tests.validators_app.runs_support import RECIPE
from tests.validators_app.test_runs_worker import (  # noqa: F401 (fixtures)
    Creations,
    broker,
    finished,
    register,
    site,
    start_worker,
    wait_for,
)
from validators_app.models import CheckStatus, RunStatus
from validators_app.services import runs

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_contradictory_allocation_configuration_fails_pre_flight_on_a_real_worker(
    start_worker: Callable,  # noqa: F811
    site: dict[str, str],  # noqa: F811
    real_tree_files: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    catalog = contradictory_catalog(real_tree_files)
    assert Recipe.objects.current().get(name=RECIPE).catalog_id == catalog.pk
    monkeypatch.setattr(runs, "recipe_input_problem", lambda recipe: None)
    worker = start_worker()
    with SimulatedCluster(SCENARIOS["healthy-h100-eks"]) as sim:
        created = Creations(sim)
        run = runs.run_start(cluster=register(sim, "contradictory"), recipe_name=RECIPE)
        wait_for(finished(run), "the run to end", logs=[worker])
        objects: dict[str, Any] = {
            kind: [o["metadata"]["name"] for o in sim.objects(kind)]
            for kind in ("ServiceAccount", "ClusterRoleBinding", "ConfigMap")
        }
    assert run.status == RunStatus.ERROR
    assert run.error == CHART_GUARD
    assert (run.ctrf, run.phase_reports, run.evidence) == (None, {}, None)
    assert run.snapshot_yaml  # AICR resolves the policy after taking the snapshot
    assert list(created.jobs) == ["aicr-validate"]  # the snapshot agent's Job, no validator's
    assert not [name for names in objects.values() for name in names if run.aicr_run_id in name]
    assert set(run.checks.values_list("status", flat=True)) == {CheckStatus.PENDING}
