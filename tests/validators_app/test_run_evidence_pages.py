"""A finished run's evidence as people see it: the run page and API link to it, the evidence
page shows the run's verdict, consensus counts a real cluster's run and never a simulated one
(labelled SIMULATED on both pages), and a run whose publishing failed says why."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client

from evidence_app.corroborate.states import FAILING, SINGLE
from evidence_app.models import Evidence
from evidence_app.services.site_key import generate_pem
from recipes_app.models import Recipe
from tests.consensus_reads import recipe_consensus_states
from tests.validators_app.evidence_support import finished_run
from tests.validators_app.runs_support import RECIPE
from validators_app.models import Environment, RunStatus, ValidationRun
from validators_app.services import runs

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def site_key(settings: Any) -> None:
    cache.clear()  # consensus badges are cached per evidence generation, across tests
    settings.SITE_SIGNING_KEY = generate_pem().decode()
    settings.SITE_SIGNING_LOCAL_KEY_FILE = None


@pytest.fixture
def recipe(real_catalog: Any) -> Recipe:
    return Recipe.objects.current().get(name=RECIPE, profile="")


def published(run: ValidationRun) -> tuple[ValidationRun, Evidence]:
    runs.run_publish(run=run)
    run.refresh_from_db()
    assert run.publish_error == ""
    assert run.evidence is not None
    return run, run.evidence


def _link(run: ValidationRun, evidence: Evidence) -> str:
    html = Client().get(f"/runs/{run.pk}/").content.decode()
    match = re.search(r'<a href="(/evidence/\d+/)">Published as evidence #(\d+)</a>', html)
    assert match is not None, "the run page does not link to its evidence"
    assert match.group(2) == str(evidence.pk)
    return match.group(1)


@pytest.mark.parametrize(
    ("status", "failing", "state"),
    [(RunStatus.PASSED, "", SINGLE), (RunStatus.FAILED, "operator-health", FAILING)],
    ids=["passed", "failed"],
)
def test_a_real_clusters_run_links_to_counted_evidence_with_its_verdict(
    recipe: Recipe, status: str, failing: str, state: str
) -> None:
    run, evidence = published(finished_run(recipe, status=status, failing=failing))

    assert evidence.verdict == "verified"
    assert Evidence.objects.counted().filter(pk=evidence.pk).exists()
    assert recipe_consensus_states(catalog=recipe.catalog).get(RECIPE) == state

    page = Client().get(_link(run, evidence))
    assert page.status_code == 200
    html = page.content.decode()
    assert "SIMULATED" not in html
    assert RECIPE in html
    api = Client().get(f"/api/v1/runs/{run.pk}/").json()
    assert api["evidence"]["id"] == evidence.pk
    assert api["evidence"]["url"].endswith(f"/api/v1/evidence/{evidence.pk}/")
    outcome = evidence.check_results["deployment"]["operator-health"]["status"]
    assert outcome == ("failed" if failing else "passed")


@pytest.mark.parametrize("status", [RunStatus.PASSED, RunStatus.FAILED])
def test_a_simulated_clusters_run_is_labelled_on_both_pages_and_never_counts(
    recipe: Recipe, status: str
) -> None:
    failing = "operator-health" if status == RunStatus.FAILED else ""
    run, evidence = published(
        finished_run(recipe, status=status, failing=failing, environment=Environment.SIMULATED)
    )

    assert evidence.is_simulated
    assert not Evidence.objects.counted().filter(pk=evidence.pk).exists()
    assert RECIPE not in recipe_consensus_states(catalog=recipe.catalog)
    run_page = Client().get(f"/runs/{run.pk}/").content.decode()
    assert "never counts" in run_page
    assert run_page.count("SIMULATED") >= 2  # the run's header and its evidence link
    evidence_page = Client().get(_link(run, evidence)).content.decode()
    assert "SIMULATED" in evidence_page


def test_a_run_whose_publishing_failed_says_why_everywhere(recipe: Recipe, settings: Any) -> None:
    settings.SITE_SIGNING_KEY = ""
    run = finished_run(recipe)

    runs.run_publish(run=run)

    run.refresh_from_db()
    assert (run.status, run.evidence) == (RunStatus.PASSED, None)  # the verdict stays
    assert "no site signing key: set SITE_SIGNING_KEY" in run.publish_error
    html = Client().get(f"/runs/{run.pk}/").content.decode()
    assert f"Not published as evidence: {run.publish_error}" in html
    assert "Published as evidence" not in html
    api = Client().get(f"/api/v1/runs/{run.pk}/").json()
    assert (api["evidence"], api["publish_error"]) == (None, run.publish_error)
    assert not Evidence.objects.exists()


def test_hostile_validator_logs_never_reach_the_bundle_or_break_the_pages(
    real_catalog: Any, django_capture_on_commit_callbacks: Any
) -> None:
    """End to end on the huge-logs scenario: 3 MB of log with invalid UTF-8, NUL, forged
    ##AICR-EXTRA## lines and HTML → a stored run, signed simulated evidence, readable pages."""
    from aicr_site.celery import app as celery_app
    from evidence_app.verification.summary_bundle import read_archive
    from tests.k8s_sim import SCENARIOS, SimulatedCluster
    from validators_app.services import clusters

    saved = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    try:
        with SimulatedCluster(SCENARIOS["huge-logs"]) as sim:
            cluster = clusters.cluster_register(
                name="sim-hostile", kubeconfig_text=sim.kubeconfig, environment="simulated"
            )
            with django_capture_on_commit_callbacks(execute=True):
                run = runs.run_start(cluster=cluster, recipe_name=RECIPE, phases=["deployment"])
    finally:
        celery_app.conf.task_always_eager = saved
    run.refresh_from_db()

    assert (run.status, run.publish_error) == (RunStatus.PASSED, "")
    health = run.checks.get(name="operator-health")
    assert "a NUL \ufffd byte in the last lines" in health.stdout  # stored copy: U+FFFD
    assert health.extra["note"] == "<b>bold</b>\ufffd"
    assert b"a NUL \\u0000 byte in the last lines" in bytes(run.ctrf)  # the CTRF: as AICR
    evidence = run.evidence
    assert evidence is not None
    assert (evidence.verdict, evidence.is_simulated) == ("verified", True)
    files = read_archive(bytes(evidence.content))
    everything = b"".join(files.values())
    for hostile in (b"<script", b"onerror", b"bold", b"forged", b"\\u0000", b"line 00"):
        assert hostile not in everything, hostile
    test = json.loads(files["summary-bundle/ctrf/deployment.json"])["results"]["tests"][0]
    assert test["extra"] == {"nodesValidated": "2", "nodesTotal": "2"}
    for path in (f"/runs/{run.pk}/", _link(run, evidence), f"/api/v1/runs/{run.pk}/"):
        page = Client().get(path)
        assert page.status_code == 200, path
        assert len(page.content) < 2_000_000, path
        body = page.content.decode()
        assert "<script>alert" not in body, path
        assert "<h1>forged" not in body, path
