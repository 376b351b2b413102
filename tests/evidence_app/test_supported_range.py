"""``AICR_SUPPORTED_RANGE``: parsed once and refused loudly when wrong; evidence outside it
is labelled (the ``aicr-unsupported`` reason, on pages, in the API and the exports) and not
counted, in SQL as in Python; the stored badges follow a change of the setting by themselves."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable

import pytest
from django.test import Client, override_settings
from django.urls import reverse

from evidence_app import consensus
from evidence_app.consensus import stored as stored_consensus
from evidence_app.exports.records import export_records
from evidence_app.models import Evidence
from evidence_app.services.staleness import stale_filter, staleness_bulk
from evidence_app.services.versions import parse_supported_range
from recipes_app.models import ConsensusRules, Recipe, RecipeConsensusState
from tests.evidence_factories import EvidenceFactory
from tests.factories import RecipeFactory
from tests.shared_data import REPO_ROOT

pytestmark = pytest.mark.django_db

RANGE = ">=1.0.0,<2.0.0"
VERSIONS = [
    "dev",
    "",
    "v0.19.0",
    "v1.0.0-rc.1",
    "v1.0.0",
    "v1.4.2+build.7",
    "v1.10.0",
    "v2.0.0-rc.1",
    "v2.0.0",
    "1.2.0",  # not semver as AICR reads it (no "v")
    "v1",
]


@pytest.mark.parametrize(
    ("text", "normalised"),
    [
        ("", ""),
        ("  ", ""),
        (">=1.0.0,<2.0.0", ">=1.0.0,<2.0.0"),
        (" >= v1.0.0 , < 2.0.0 ", ">=1.0.0,<2.0.0"),
        ("=1.2.3", "==1.2.3"),
        ("==v1.2.3-rc.1", "==1.2.3-rc.1"),
        (">0.19.0,<=1.0.0", ">0.19.0,<=1.0.0"),
    ],
)
def test_it_reads_the_operator_policy_form(text: str, normalised: str) -> None:
    assert parse_supported_range(text).text == normalised


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("~1.0", "'~1.0' is not a comparison"),
        ("1.0.0", "'1.0.0' is not a comparison"),
        (">=1.0.0,", "'' is not a comparison"),
        (">=banana", "'banana' is not a semver version"),
        (">=", "'(nothing)' is not a semver version"),
        (">=01.0.0", "not a semver version"),
        ("=>1.0.0", "'>1.0.0' is not a semver version"),
    ],
)
def test_it_refuses_a_range_it_cannot_read_naming_the_part(text: str, named: str) -> None:
    with pytest.raises(ValueError, match=re.escape(named)):
        parse_supported_range(text)


def test_it_fails_at_startup_naming_the_setting() -> None:
    env = {**os.environ, "AICR_SUPPORTED_RANGE": ">=1.0.0,<two", "DEBUG": "1"}
    done = subprocess.run(
        [sys.executable, "-c", "import aicr_site.settings"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    assert "ImproperlyConfigured: AICR_SUPPORTED_RANGE='>=1.0.0,<two'" in done.stderr
    assert "'two' is not a semver version" in done.stderr


def test_it_places_releases_and_never_a_non_release() -> None:
    supported = parse_supported_range(RANGE)
    inside = [v for v in VERSIONS if supported.contains(v)]
    assert inside == ["v1.0.0", "v1.4.2+build.7", "v1.10.0", "v2.0.0-rc.1", "v1"]
    anything = parse_supported_range("")
    assert all(anything.contains(v) for v in VERSIONS)  # empty: dev included


@pytest.mark.parametrize("text", ["", RANGE, ">0.19.0", "==1.0.0", "<=1.0.0-rc.1,>=0.19.0"])
def test_it_counts_the_same_rows_in_sql_and_in_python(
    example_recipe: Recipe, evidence_db: None, text: str
) -> None:
    made = [EvidenceFactory(recipe=example_recipe, aicr_version=v) for v in VERSIONS]
    with override_settings(AICR_SUPPORTED_RANGE=text):
        supported = parse_supported_range(text)
        loaded = list(Evidence.objects.select_related("signer"))
        in_python = {e.pk for e in loaded if consensus.is_counted(e)}
        assert set(Evidence.objects.counted().values_list("pk", flat=True)) == in_python
        assert in_python == {e.pk for e in made if supported.contains(e.aicr_version)}
        exported = {
            r["id"]: r for r in export_records(Evidence.objects.all(), url_of=lambda n, p: "")
        }
        assert {pk for pk, r in exported.items() if r["counted"]} == in_python
        reasons = staleness_bulk(loaded)
        unsupported = {pk for pk, rs in reasons.items() if "aicr-unsupported" in codes(rs)}
        assert unsupported == {e.pk for e in made} - in_python
        for pk, record in exported.items():
            assert record["stale_reasons"] == codes(reasons[pk])
        stale_sql = set(
            stale_filter(Evidence.objects.all(), stale=True).values_list("pk", flat=True)
        )
        assert stale_sql == {pk for pk, rs in reasons.items() if rs}


def codes(reasons: list) -> list[str]:  # type: ignore[type-arg]
    return [r.code for r in reasons]


PASSES = {"deployment": [{"name": "operator-health", "status": "passed"}]}


def _list_read() -> str:
    """A recipe list read, which keeps the stored badges current."""
    return Client().get("/recipes/").content.decode()


def test_it_stops_counting_evidence_outside_the_range_and_the_stored_badges_follow(
    evidence_db: None,
) -> None:
    recipe = RecipeFactory(checks={"deployment": [{"name": "operator-health", "thresholds": []}]})
    old = EvidenceFactory(recipe=recipe, aicr_version="v0.19.0", check_results=PASSES)
    EvidenceFactory(recipe=recipe, aicr_version="v1.2.0", check_results=PASSES)
    assert RecipeConsensusState.objects.get(recipe=recipe).state == consensus.CONFIRMED

    with override_settings(AICR_SUPPORTED_RANGE=RANGE):
        # Nothing changed but the setting: no service ran, the stored badge is the old one
        # until the next list read compares the settings it was computed under.
        assert RecipeConsensusState.objects.get(recipe=recipe).state == consensus.CONFIRMED
        _list_read()
        row = RecipeConsensusState.objects.get(recipe=recipe)
        assert row.state == consensus.SINGLE
        assert row.counted_runs == 1
        assert ConsensusRules.objects.get().fingerprint == stored_consensus.rules_fingerprint()
        grid = consensus.consensus_grid(recipe=recipe)
        assert grid.consensus.badge == consensus.RecipeBadge.stored(row)
        unsupported = grid.unsupported_columns
        assert [c.evidence.pk for c in unsupported] == [old.pk]
        assert not unsupported[0].counted
        page = Client().get(reverse("recipes:detail", args=[recipe.name])).content.decode()
        assert "1 counted · 0 reported · 1 outside the supported AICR range signers" in page

    _list_read()
    assert RecipeConsensusState.objects.get(recipe=recipe).state == consensus.CONFIRMED


def test_it_gives_a_badge_to_a_recipe_whose_evidence_enters_the_range(evidence_db: None) -> None:
    """A recipe with no stored row (all its evidence was outside the range) gets one when the
    range widens: the settings check refreshes every badge, not only the stored rows."""
    with override_settings(AICR_SUPPORTED_RANGE=RANGE):
        recipe = RecipeFactory(checks={"deployment": [{"name": "operator-health"}]})
        EvidenceFactory(recipe=recipe, aicr_version="dev", check_results=PASSES)
        assert not RecipeConsensusState.objects.filter(recipe=recipe).exists()
    _list_read()
    assert RecipeConsensusState.objects.get(recipe=recipe).state == consensus.SINGLE


def test_it_does_not_refresh_when_the_settings_are_the_ones_stored(evidence_db: None) -> None:
    recipe = RecipeFactory()
    EvidenceFactory(recipe=recipe, check_results=PASSES)
    before = RecipeConsensusState.objects.get(recipe=recipe).refreshed_at
    assert stored_consensus.consensus_refresh_expired() == 0
    assert RecipeConsensusState.objects.get(recipe=recipe).refreshed_at == before
    ConsensusRules.objects.all().delete()  # a database from before the row existed
    assert stored_consensus.consensus_refresh_expired() == 1


@pytest.fixture
def dev_run(example_recipe: Recipe) -> Evidence:
    return EvidenceFactory(recipe=example_recipe, aicr_version="dev", check_results=PASSES)


LABEL = "outside the supported AICR range (&gt;=1.0.0,&lt;2.0.0)"


@override_settings(AICR_SUPPORTED_RANGE=RANGE)
def test_it_labels_evidence_outside_the_range_on_the_pages(
    client: Client, dev_run: Evidence, example_recipe: Recipe
) -> None:
    page = client.get(reverse("evidence:detail", args=[dev_run.pk])).content.decode()
    assert LABEL in page
    assert "not a release: no range can place it" in page
    for url in (
        reverse("recipes:detail", args=[example_recipe.name]),
        reverse("recipes:history", args=[example_recipe.name]),
        reverse("evidence:signer", args=[dev_run.signer.slug]),
        "/evidence/",
    ):
        response = client.get(url)
        assert response.status_code == 200, url
        assert LABEL in response.content.decode(), url


@override_settings(AICR_SUPPORTED_RANGE="")
def test_it_labels_nothing_without_a_range(client: Client, dev_run: Evidence) -> None:
    page = client.get(reverse("evidence:detail", args=[dev_run.pk])).content.decode()
    assert "outside the supported AICR range" not in page


@override_settings(AICR_SUPPORTED_RANGE=RANGE)
def test_it_says_so_in_the_api_and_the_exports(
    client: Client,
    dev_run: Evidence,
    api: Callable[[str | None], Client],
    make_token: Callable[..., str],
) -> None:
    detail = client.get(f"/api/v1/evidence/{dev_run.pk}/").json()
    assert detail["counted"] is False
    assert detail["stale"] is True
    reason = next(r for r in detail["stale_reasons"] if r["code"] == "aicr-unsupported")
    assert "outside the supported AICR range (>=1.0.0,<2.0.0)" in reason["detail"]
    listed = client.get("/api/v1/evidence/", {"stale": "true"}).json()["results"]
    assert dev_run.pk in [r["id"] for r in listed]
    counted = client.get("/api/v1/evidence/", {"counted": "true"}).json()["results"]
    assert dev_run.pk not in [r["id"] for r in counted]

    auditor = api(make_token("audrey", "auditor"))
    body = b"".join(auditor.get("/api/v1/export/evidence.ndjson").streaming_content)
    record = next(r for r in map(json.loads, body.splitlines()) if r["id"] == dev_run.pk)
    assert record["counted"] is False
    assert "aicr-unsupported" in record["stale_reasons"]
    csv_body = b"".join(auditor.get("/api/v1/export/evidence.csv").streaming_content).decode()
    assert "aicr-unsupported" in csv_body


@override_settings(AICR_SUPPORTED_RANGE=RANGE)
def test_it_labels_a_catalog_and_a_run_outside_the_range(
    client: Client,
    example_recipe: Recipe,
    django_capture_on_commit_callbacks: Callable[..., object],
) -> None:
    from tests.validators_app.runs_support import RECIPE, cluster_row
    from validators_app.services import runs

    label = "catalog AICR dev is outside the supported AICR range (&gt;=1.0.0,&lt;2.0.0)"
    for url in ("/recipes/", reverse("recipes:detail", args=[example_recipe.name]), "/"):
        assert label in client.get(url).content.decode(), url
    with django_capture_on_commit_callbacks(execute=False):  # type: ignore[operator]
        run = runs.run_start(cluster=cluster_row(), recipe_name=RECIPE, phases=["deployment"])
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert f"run AICR {run.aicr_version} is outside the supported AICR range" in page


def test_it_labels_no_catalog_without_a_range(client: Client, example_recipe: Recipe) -> None:
    page = client.get(reverse("recipes:detail", args=[example_recipe.name])).content.decode()
    assert "outside the supported AICR range" not in page
