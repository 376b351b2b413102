"""The consensus grid built from database rows, against AICR's own generator outputs and the
corroboration rules (``evidence_app.corroborate``) on hand-built evidence."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from evidence_app import consensus
from evidence_app.consensus.grid import COUNTED_COLUMNS_SHOWN, OTHER_COLUMNS_SHOWN, Row
from evidence_app.corroborate import (
    CONFIRMED,
    CONTESTED,
    FAILING,
    PARTIAL,
    SINGLE,
    UNTESTED,
    compatible_meta_schema,
    format_when,
    parse_rfc3339,
    source_id,
)
from evidence_app.models import Evidence, SignerClass
from evidence_app.services import signers
from evidence_app.services.withdrawal import evidence_withdraw
from recipes_app.models import Recipe, RecipeConsensusState
from tests import consensus_reads
from tests.evidence_factories import EvidenceFactory, SignerFactory
from tests.factories import CatalogFactory, RecipeFactory
from tests.shared_data import AICR, GOLDEN

pytestmark = pytest.mark.django_db

CORROBORATE = GOLDEN / "corroborate"
FIXTURE_TREE = AICR / "pkg/corroborate/testdata/gcs"
NO_CHECKS: dict[str, Any] = {}


# --- building evidence rows -----------------------------------------------------------------


def ctrf_results(ctrf_by_phase: dict[str, Any]) -> dict[str, Any]:
    """``check_results`` as ingest stores them, from CTRF reports (a later duplicate name
    replaces an earlier one, as AICR's generator reads them)."""
    results: dict[str, Any] = {}
    for phase, report in ctrf_by_phase.items():
        tests = (report.get("results") or {}).get("tests") or []
        results[phase] = {t["name"]: {"status": t.get("status", "")} for t in tests}
    return results


def store_runs(runs: list[tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, Recipe]:
    """Evidence rows for AICR runs (``meta.json``, CTRF by phase) the generator admits.

    Runs are stored in ``runId`` order, so the database's tie-break (newest id) is AICR's
    (``runId`` descending) for runs attested at the same instant.
    """
    catalog = CatalogFactory()
    recipes: dict[str, Recipe] = {}
    signers: dict[tuple[str, str], Any] = {}
    for meta, ctrf in sorted(runs, key=lambda r: r[0].get("runId", "")):
        signer_meta = meta["signer"]
        instant = parse_rfc3339(meta.get("attestedAt", ""))
        issuer, identity = signer_meta.get("issuer", ""), signer_meta.get("identity", "")
        if instant is None or not compatible_meta_schema(meta.get("schemaVersion", "")):
            continue  # AICR skips the run; ingest would never store it
        if not issuer or not identity:
            continue
        name = meta["recipe"]
        if name not in recipes:
            recipes[name] = RecipeFactory(catalog=catalog, name=name, checks=NO_CHECKS)
        key = (issuer, identity)
        if key not in signers:
            signers[key] = SignerFactory(
                issuer=issuer,
                identity=identity,
                counted=bool(signer_meta.get("allowlisted")),
                signer_class=signer_meta.get("class") or SignerClass.COMMUNITY,
                label=identity[-60:],
            )
        EvidenceFactory(
            recipe=recipes[name],
            signer=signers[key],
            aicr_version=meta.get("aicrVersion", ""),
            k8s_version=meta.get("k8sVersion", ""),
            attested_at=datetime.fromtimestamp(instant / 1e9, tz=UTC),
            check_results=ctrf_results(ctrf),
        )
    return recipes


def tree_runs(root: Path) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    runs = []
    for meta_path in sorted(root.rglob("meta.json")):
        ctrf = {
            p.stem: json.loads(p.read_text())
            for p in sorted((meta_path.parent / "ctrf").glob("*.json"))
        }
        runs.append((json.loads(meta_path.read_text()), ctrf))
    return runs


def tabs_of(index: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        tab["recipe"]: tab
        for group in index.get("groups", [])
        for dashboard in group["dashboards"]
        for tab in dashboard["tabs"]
    }


def grid_as_aicr(grid: consensus.ConsensusGrid) -> dict[str, Any]:
    """The grid in the shape of one of AICR's index.json grids."""
    tests = []
    for row in grid.rows:
        signers = sorted(
            (
                {
                    "src": cell.column.key,
                    "result": cell.result,
                    "aicrVer": cell.column.evidence.aicr_version,
                    "k8sVer": cell.column.evidence.k8s_version,
                    "when": format_when(
                        cell.column.evidence.attested_at.strftime("%Y-%m-%dT%H:%M:%SZ")
                    ),
                }
                for cell in row.cells
                if cell.result in ("pass", "fail")
            ),
            key=lambda s: s["src"],
        )
        tests.append(
            {
                "phase": row.phase,
                "name": row.name,
                "consensus": row.state,
                "reported": row.consensus.reported,
                "signers": signers,
            }
        )
    return {"phaseRollup": dict(sorted(grid.phase_rollup.items())), "tests": tests}


def aicr_grid(grid: dict[str, Any]) -> dict[str, Any]:
    keep = ("src", "result", "aicrVer", "k8sVer", "when")
    return {
        "phaseRollup": grid["phaseRollup"],
        "tests": [
            {
                **{k: row[k] for k in ("phase", "name", "consensus", "reported")},
                "signers": [{k: s[k] for k in keep} for s in row["signers"]],
            }
            for row in grid["tests"]
        ],
    }


def assert_same_as_aicr(recipes: dict[str, Recipe], index: dict[str, Any]) -> int:
    compared = 0
    for name, tab in tabs_of(index).items():
        recipe = recipes[name]
        combined = consensus.consensus_grid(recipe=recipe)
        assert grid_as_aicr(combined) == aicr_grid(tab["combined"]), name
        versions = [v["aicrVer"] for v in tab["versions"]]
        assert [o.value for o in combined.lens_options[1:]] == [v for v in versions if v]
        for version in tab["versions"]:
            if not version["aicrVer"]:
                continue  # a run without a version is only reachable through the default lens
            grid = consensus.consensus_grid(recipe=recipe, lens=version["aicrVer"])
            assert grid.lens == version["aicrVer"]
            assert grid_as_aicr(grid) == aicr_grid(version), (name, version["aicrVer"])
            compared += 1
        compared += 1
    return compared


# --- AICR's own outputs ---------------------------------------------------------------------


def test_it_reproduces_aicrs_dashboard_for_its_fixture_tree() -> None:
    """index.json of AICR's generator run on its fixture tree: every grid, combined and per
    AICR version (rows, states, reported counts, signers with results, phase rollups)."""
    recipes = store_runs(tree_runs(FIXTURE_TREE))
    index = json.loads((CORROBORATE / "index.json").read_text())

    # kubeflow: combined + v1.0.0 + v0.14.0; gke: combined + v1.0.0
    assert assert_same_as_aicr(recipes, index) == 5

    kubeflow = consensus.consensus_grid(recipe=recipes["h100-eks-ubuntu-training-kubeflow"])
    assert kubeflow.phase_rollup == {
        "deployment": PARTIAL,
        "conformance": UNTESTED,
        "performance": CONTESTED,
    }
    assert kubeflow.state == CONTESTED
    assert [c.group for c in kubeflow.columns] == ["counted", "counted", "reported"]


def _scenarios() -> list[dict[str, Any]]:
    vectors = json.loads((CORROBORATE / "vectors.json").read_text())
    return [
        v
        for v in vectors["groups"]["scenario"]["vectors"]
        if v["input"].get("runs") and tabs_of(v["observed"].get("index") or {})
    ]


@pytest.mark.parametrize("vector", _scenarios(), ids=lambda v: v["id"])
def test_it_reproduces_aicrs_generator_scenarios(vector: dict[str, Any]) -> None:
    runs = [(run["meta"], run.get("ctrf") or {}) for run in vector["input"]["runs"]]
    recipes = store_runs(runs)

    assert assert_same_as_aicr(recipes, vector["observed"]["index"]) >= 1


# --- the rules on hand-built evidence -------------------------------------------------------


def passed(*names: str, phase: str = "deployment") -> dict[str, Any]:
    return {phase: {name: {"status": "passed"} for name in names}}


def results(**by_name: str) -> dict[str, Any]:
    """``results(operator_health="failed")``: deployment statuses by check name."""
    return {"deployment": {k.replace("_", "-"): {"status": v} for k, v in by_name.items()}}


@pytest.fixture
def recipe() -> Recipe:
    return RecipeFactory(
        checks={
            "deployment": [
                {"name": "operator-health", "thresholds": []},
                {"name": "expected-resources", "thresholds": []},
            ],
            "performance": [
                {
                    "name": "nccl-all-reduce-bw",
                    "thresholds": [{"name": "nccl-all-reduce-bw", "value": ">= 300"}],
                }
            ],
        }
    )


def row(grid: consensus.ConsensusGrid, name: str) -> Row:
    return next(r for r in grid.rows if r.name == name)


def test_it_lists_declared_checks_as_untested_rows_without_evidence(recipe: Recipe) -> None:
    grid = consensus.consensus_grid(recipe=recipe)

    assert [(r.phase, r.name, r.state) for r in grid.rows] == [
        ("deployment", "expected-resources", UNTESTED),
        ("deployment", "operator-health", UNTESTED),
        ("performance", "nccl-all-reduce-bw", UNTESTED),
    ]
    assert all(r.declared for r in grid.rows)
    assert row(grid, "nccl-all-reduce-bw").thresholds == [
        {"name": "nccl-all-reduce-bw", "value": ">= 300"}
    ]
    assert grid.columns == []
    assert grid.state == UNTESTED
    assert grid.phase_rollup == {
        "deployment": UNTESTED,
        "conformance": UNTESTED,
        "performance": UNTESTED,
    }


def test_it_adds_ctrf_names_found_in_evidence(recipe: Recipe) -> None:
    EvidenceFactory(recipe=recipe, check_results=passed("operator-health", "driver-ready"))

    grid = consensus.consensus_grid(recipe=recipe)

    assert [r.name for r in grid.phases[0].rows] == [
        "driver-ready",
        "expected-resources",
        "operator-health",
    ]
    assert row(grid, "driver-ready").declared is False
    assert row(grid, "driver-ready").state == SINGLE


def test_it_counts_distinct_signers_never_builds(recipe: Recipe) -> None:
    signer = SignerFactory()
    for day in range(5):  # five nightly runs of one CI loop are one voice
        EvidenceFactory(
            recipe=recipe,
            signer=signer,
            check_results=passed("operator-health"),
            attested_at=timezone.now() - timedelta(days=day),
        )

    grid = consensus.consensus_grid(recipe=recipe)

    assert len(grid.columns) == 1
    assert row(grid, "operator-health").state == SINGLE

    EvidenceFactory(recipe=recipe, check_results=passed("operator-health"))
    assert row(consensus.consensus_grid(recipe=recipe), "operator-health").state == CONFIRMED


def test_it_takes_each_signers_latest_run_without_falling_back_per_row(recipe: Recipe) -> None:
    signer = SignerFactory()
    now = timezone.now()
    EvidenceFactory(
        recipe=recipe,
        signer=signer,
        attested_at=now - timedelta(days=2),
        check_results=results(operator_health="passed", expected_resources="passed"),
    )
    EvidenceFactory(
        recipe=recipe,
        signer=signer,
        attested_at=now - timedelta(days=1),
        check_results=results(operator_health="failed"),
    )

    grid = consensus.consensus_grid(recipe=recipe)

    assert row(grid, "operator-health").state == FAILING
    # The older run's pass does not fill the row the newer run lacks.
    assert row(grid, "expected-resources").state == UNTESTED
    assert row(grid, "expected-resources").cells[0].result == "not-run"
    assert grid.phases[0].state == FAILING


def test_it_surfaces_disagreement_as_contested(recipe: Recipe) -> None:
    EvidenceFactory(recipe=recipe, check_results=results(operator_health="passed"))
    EvidenceFactory(recipe=recipe, check_results=results(operator_health="failed"))

    grid = consensus.consensus_grid(recipe=recipe)

    assert row(grid, "operator-health").state == CONTESTED
    assert grid.state == CONTESTED


@pytest.mark.parametrize(
    ("status", "result"),
    [
        ("passed", "pass"),
        ("failed", "fail"),
        ("other", "fail"),
        ("weird", "fail"),
        ("", "fail"),
        ("skipped", "not-run"),
        ("pending", "not-run"),
    ],
)
def test_it_buckets_ctrf_statuses_like_aicr(recipe: Recipe, status: str, result: str) -> None:
    EvidenceFactory(recipe=recipe, check_results=results(operator_health=status))

    cell = row(consensus.consensus_grid(recipe=recipe), "operator-health").cells[0]

    assert cell.result == result


def test_it_shows_reported_signers_with_zero_weight(recipe: Recipe) -> None:
    counted = SignerFactory(label="acme/lab")
    reported = SignerFactory(counted=False, label="stranger/fork")
    EvidenceFactory(recipe=recipe, signer=reported, check_results=results(operator_health="failed"))
    EvidenceFactory(recipe=recipe, signer=counted, check_results=results(operator_health="passed"))

    grid = consensus.consensus_grid(recipe=recipe)

    health = row(grid, "operator-health")
    assert health.state == SINGLE  # the reported fail changes nothing
    assert health.consensus.reported == 1
    assert [c.signer.label for c in grid.columns] == ["acme/lab", "stranger/fork"]
    assert [c.group for c in grid.columns] == ["counted", "reported"]
    assert [c.result for c in health.cells] == ["pass", "fail"]


def test_it_never_counts_simulated_evidence_and_gives_it_its_own_column(recipe: Recipe) -> None:
    signer = SignerFactory(label="server key")
    EvidenceFactory(
        recipe=recipe,
        signer=signer,
        check_results=results(operator_health="passed"),
        attested_at=timezone.now() - timedelta(days=1),
    )
    EvidenceFactory(
        recipe=recipe,
        signer=signer,
        is_simulated=True,
        check_results=results(operator_health="failed"),
    )

    grid = consensus.consensus_grid(recipe=recipe)

    health = row(grid, "operator-health")
    assert health.state == SINGLE  # the newer simulated fail neither counts nor hides the pass
    assert health.consensus.reported == 0
    assert [(c.group, c.evidence.is_simulated) for c in grid.columns] == [
        ("counted", False),
        ("simulated", True),
    ]
    assert [c.result for c in health.cells] == ["pass", "fail"]


def test_it_leaves_withdrawn_evidence_out_and_lists_it(recipe: Recipe) -> None:
    signer = SignerFactory()
    kept = EvidenceFactory(
        recipe=recipe,
        signer=signer,
        check_results=results(operator_health="passed"),
        attested_at=timezone.now() - timedelta(days=1),
    )
    gone = EvidenceFactory(
        recipe=recipe,
        signer=signer,
        check_results=results(operator_health="failed"),
        withdrawn_at=timezone.now(),
        withdrawal_reason="wrong cluster",
    )

    grid = consensus.consensus_grid(recipe=recipe)

    assert [c.evidence for c in grid.columns] == [kept]
    assert row(grid, "operator-health").state == SINGLE
    assert grid.withdrawn == [gone]
    assert [r.code for r in grid.stale[gone.pk]] == ["withdrawn"]


def test_it_counts_demo_evidence_and_keeps_its_label(recipe: Recipe) -> None:
    EvidenceFactory(recipe=recipe, is_demo=True, check_results=results(operator_health="passed"))

    grid = consensus.consensus_grid(recipe=recipe)

    assert row(grid, "operator-health").state == SINGLE
    assert grid.columns[0].evidence.is_demo is True


def test_it_marks_evidence_without_ctrf_as_a_phase_summary_only(recipe: Recipe) -> None:
    evidence = EvidenceFactory(recipe=recipe, check_results={})

    grid = consensus.consensus_grid(recipe=recipe)

    column = grid.columns[0]
    assert column.evidence == evidence
    assert column.summary_only is True
    assert grid.has_summary_only is True
    assert all(r.state == UNTESTED for r in grid.rows)
    summary = grid.phases[0].summaries[0].summary
    assert summary is not None
    expected = evidence.predicate["phases"]["deployment"]
    assert (summary.passed, summary.failed, summary.skipped) == (
        expected["passed"],
        expected["failed"],
        expected["skipped"],
    )


def test_it_folds_phases_and_the_recipe_worst_first_with_partial(recipe: Recipe) -> None:
    EvidenceFactory(recipe=recipe, check_results=results(operator_health="passed"))
    EvidenceFactory(recipe=recipe, check_results=results(operator_health="passed"))

    grid = consensus.consensus_grid(recipe=recipe)

    assert row(grid, "operator-health").state == CONFIRMED
    assert row(grid, "expected-resources").state == UNTESTED
    assert grid.phase_rollup["deployment"] == PARTIAL
    assert grid.phase_rollup["performance"] == UNTESTED
    assert grid.state == PARTIAL
    assert (grid.rollup.confirmed, grid.rollup.untested) == (1, 2)


def test_its_version_lens_is_strict_same_version_consensus(recipe: Recipe) -> None:
    now = timezone.now()
    a, b = SignerFactory(label="a"), SignerFactory(label="b")
    EvidenceFactory(
        recipe=recipe,
        signer=a,
        aicr_version="v0.14.0",
        attested_at=now - timedelta(days=3),
        check_results=results(operator_health="passed"),
    )
    EvidenceFactory(
        recipe=recipe,
        signer=a,
        aicr_version="v1.0.0",
        attested_at=now - timedelta(days=1),
        check_results=results(operator_health="failed"),
    )
    EvidenceFactory(
        recipe=recipe,
        signer=b,
        aicr_version="v0.14.0",
        attested_at=now - timedelta(days=2),
        check_results=results(operator_health="passed"),
    )

    latest = consensus.consensus_grid(recipe=recipe)
    old = consensus.consensus_grid(recipe=recipe, lens="v0.14.0")
    new = consensus.consensus_grid(recipe=recipe, lens="v1.0.0")

    assert [o.value for o in latest.lens_options] == ["", "v1.0.0", "v0.14.0"]
    assert row(latest, "operator-health").state == CONTESTED  # a's latest fails, b passes
    assert row(old, "operator-health").state == CONFIRMED  # a and b agreed at v0.14.0
    assert row(new, "operator-health").state == FAILING  # only a ran v1.0.0
    assert [c.signer for c in new.columns] == [a]
    assert [o.value for o in new.lens_options if o.selected] == ["v1.0.0"]


def test_it_refuses_an_unknown_lens_and_falls_back_to_the_latest_runs(recipe: Recipe) -> None:
    EvidenceFactory(recipe=recipe, check_results=results(operator_health="passed"))

    grid = consensus.consensus_grid(recipe=recipe, lens="v9.9.9<script>")

    assert grid.lens == ""
    assert "v9.9.9<script>" in grid.lens_error
    assert row(grid, "operator-health").state == SINGLE


def test_it_matches_evidence_of_every_catalog_version_by_recipe_name(recipe: Recipe) -> None:
    earlier = CatalogFactory()
    earlier.imported_at = recipe.catalog.imported_at - timedelta(days=1)
    earlier.save(update_fields=["imported_at"])
    older = RecipeFactory(name=recipe.name, catalog=earlier, checks=NO_CHECKS, digest="0" * 64)
    EvidenceFactory(recipe=older, check_results=results(operator_health="passed"))

    grid = consensus.consensus_grid(recipe=recipe)

    assert row(grid, "operator-health").state == SINGLE
    assert "recipe-changed" in [r.code for r in grid.columns[0].stale]


def test_it_reads_the_grid_in_a_constant_number_of_queries(recipe: Recipe) -> None:
    def queries_for(count: int) -> int:
        Evidence.objects.filter(recipe_name=recipe.name).delete()
        for _ in range(count):
            EvidenceFactory(
                recipe=recipe, check_results=results(operator_health="passed"), is_demo=True
            )
        with CaptureQueriesContext(connection) as queries:
            grid = consensus.consensus_grid(recipe=recipe)
        assert grid.counts.total == count
        return len(queries)

    queries_for(1)  # the validator catalog version is read once per catalog and process
    assert queries_for(1) == queries_for(30)


# --- many recipes at once -------------------------------------------------------------------


def test_its_list_states_agree_with_the_grids() -> None:
    catalog = CatalogFactory()
    checks = {"deployment": [{"name": "operator-health", "thresholds": []}]}
    recipes = RecipeFactory.create_batch(6, catalog=catalog, checks=checks)
    a, b, stranger = SignerFactory(), SignerFactory(), SignerFactory(counted=False)
    EvidenceFactory(recipe=recipes[0], signer=a, check_results=results(operator_health="passed"))
    EvidenceFactory(recipe=recipes[0], signer=b, check_results=results(operator_health="passed"))
    EvidenceFactory(recipe=recipes[1], signer=a, check_results=results(operator_health="passed"))
    EvidenceFactory(recipe=recipes[1], signer=b, check_results=results(operator_health="failed"))
    EvidenceFactory(
        recipe=recipes[2],
        signer=a,
        check_results=results(operator_health="passed", extra_check="skipped"),
    )
    EvidenceFactory(
        recipe=recipes[3], signer=stranger, check_results=results(operator_health="passed")
    )
    EvidenceFactory(
        recipe=recipes[4],
        signer=a,
        is_simulated=True,
        check_results=results(operator_health="passed"),
    )
    EvidenceFactory(
        recipe=recipes[5],
        signer=a,
        withdrawn_at=timezone.now(),
        withdrawal_reason="mistake",
        check_results=results(operator_health="passed"),
    )

    states = consensus_reads.recipe_consensus_states(catalog=catalog)

    for recipe in recipes:
        grid = consensus.consensus_grid(recipe=recipe)
        assert consensus_reads.state_of(states, recipe.name) == grid.state, recipe.name
    assert [consensus_reads.state_of(states, r.name) for r in recipes] == [
        CONFIRMED,
        CONTESTED,
        PARTIAL,  # the skipped CTRF name is an untested row
        UNTESTED,
        UNTESTED,
        UNTESTED,
    ]


def test_its_list_states_cost_one_query_whatever_the_number_of_recipes() -> None:
    """The stored badges are read in one query; computing them (what every refresh does)
    costs a constant number whatever the number of recipes."""
    catalog = CatalogFactory()

    def queries_for(count: int) -> tuple[int, int]:
        total = len(consensus_reads.recipe_consensus_states(catalog=catalog)) + count
        for recipe in RecipeFactory.create_batch(count, catalog=catalog):
            EvidenceFactory(recipe=recipe, check_results=results(operator_health="passed"))
        with CaptureQueriesContext(connection) as compute:
            consensus.recipe_badges_computed()
        with CaptureQueriesContext(connection) as read:
            assert len(consensus_reads.recipe_consensus_states(catalog=catalog)) == total
        return len(compute), len(read)

    queries_for(1)  # the validator catalog version is read once per catalog and process
    one = queries_for(1)
    assert one == queries_for(30)
    assert one[1] == 1
    assert one[0] <= 6


def test_its_list_states_change_with_uploads_withdrawals_and_signer_changes() -> None:
    catalog = CatalogFactory()
    recipe = RecipeFactory(catalog=catalog, checks=NO_CHECKS)
    signer = SignerFactory()
    first = EvidenceFactory(
        recipe=recipe, signer=signer, check_results=results(operator_health="passed")
    )
    assert consensus_reads.recipe_consensus_states(catalog=catalog) == {recipe.name: SINGLE}

    EvidenceFactory(recipe=recipe, check_results=results(operator_health="passed"))
    assert consensus_reads.recipe_consensus_states(catalog=catalog) == {recipe.name: CONFIRMED}

    evidence_withdraw(evidence=first, by=None, roles={"maintainer"}, reason="bad run")
    assert consensus_reads.recipe_consensus_states(catalog=catalog) == {recipe.name: SINGLE}

    # An allowlist without these signers: they are re-classified as reported.
    signers.allowlist_publish(body="schemaVersion: 1.0.0\n", note="everyone removed")
    assert consensus_reads.recipe_consensus_states(catalog=catalog) == {}


def test_its_counted_rule_is_the_querysets() -> None:
    """``is_counted`` (the API's ``counted``, the evidence tables' "counts", the grid's
    counted columns) mirrors ``EvidenceQuerySet.counted()`` on every combination."""
    recipe = RecipeFactory()
    counted, reported = SignerFactory(), SignerFactory(counted=False)
    rows = [
        EvidenceFactory(
            recipe=recipe,
            signer=signer,
            verdict=verdict,
            is_simulated=simulated,
            is_demo=demo,
            withdrawn_at=timezone.now() if withdrawn else None,
            withdrawal_reason="gone" if withdrawn else "",
        )
        for signer in (counted, reported)
        for verdict in ("verified", "invalid")
        for simulated in (False, True)
        for demo in (False, True)
        for withdrawn in (False, True)
    ]
    in_sql = set(Evidence.objects.counted().values_list("pk", flat=True))

    assert {e.pk for e in Evidence.objects.select_related("signer") if consensus.is_counted(e)} == (
        in_sql
    )
    assert len(in_sql) == 2  # counted signer, verified, real, not withdrawn: demo or not
    assert all(consensus.is_counted(e) == (e.pk in in_sql) for e in rows)


def test_its_list_badges_carry_demo_and_staleness_like_the_grid() -> None:
    catalog = CatalogFactory()
    recipe = RecipeFactory(catalog=catalog, checks=NO_CHECKS)
    EvidenceFactory(
        recipe=recipe,
        is_demo=True,
        attested_at=timezone.now() - timedelta(days=40),
        check_results=results(operator_health="passed"),
    )
    EvidenceFactory(recipe=recipe, check_results=results(operator_health="passed"))

    badge = consensus_reads.recipe_consensus_badges(catalog=catalog)[recipe.name]
    grid = consensus.consensus_grid(recipe=recipe)

    assert badge == grid.consensus.badge
    assert badge.state == CONFIRMED
    assert badge.includes_demo is True
    assert (badge.stale.counted_runs, badge.stale.stale_runs) == (2, 1)
    assert badge.stale.reasons == (("older-than-30-days", 1),)
    row = RecipeConsensusState.objects.get(recipe=recipe)
    assert (row.includes_demo, row.counted_runs, row.stale_runs) == (True, 2, 1)
    assert row.stale_reasons == {"older-than-30-days": 1}


def test_the_source_id_is_the_verified_identity_hash() -> None:
    signer = SignerFactory()

    assert signer.source_id == source_id(signer.issuer, signer.identity)


def test_it_caps_the_shown_columns_and_still_counts_every_signer(recipe: Recipe) -> None:
    base = timezone.now() - timedelta(days=1)
    total = COUNTED_COLUMNS_SHOWN + 5
    for i in range(total):
        EvidenceFactory(
            recipe=recipe,
            attested_at=base + timedelta(minutes=i),
            check_results=results(operator_health="failed" if i == 0 else "passed"),
        )
    for _ in range(OTHER_COLUMNS_SHOWN + 2):
        EvidenceFactory(
            recipe=recipe,
            signer=SignerFactory(counted=False),
            check_results=results(operator_health="passed"),
        )

    grid = consensus.consensus_grid(recipe=recipe)
    assert grid.counts.counted == total  # every column, though only the shown ones are read
    assert len(grid.counted_columns) == COUNTED_COLUMNS_SHOWN
    assert grid.is_capped
    assert grid.shown_counted == COUNTED_COLUMNS_SHOWN
    assert grid.shown_reported == OTHER_COLUMNS_SHOWN
    # The oldest run (the only failure) is not shown, and still makes the row CONTESTED.
    assert row(grid, "operator-health").state == CONTESTED
    assert row(grid, "operator-health").consensus.reported == OTHER_COLUMNS_SHOWN + 2
    assert all(cell.result == "pass" for cell in row(grid, "operator-health").cells[:40])
    assert len(row(grid, "operator-health").cells) == len(grid.shown_columns)
    assert all(len(p.summaries) == len(grid.shown_columns) for p in grid.phases)
    shown_runs = {c.evidence.attested_at for c in grid.shown_columns if c.counted}
    assert min(shown_runs) == base + timedelta(minutes=total - COUNTED_COLUMNS_SHOWN)

    everything = consensus.consensus_grid(recipe=recipe, signers="all")
    assert not everything.is_capped
    assert everything.cappable
    assert len(row(everything, "operator-health").cells) == len(everything.columns)
    assert len(everything.counted_columns) == total
    assert everything.state == grid.state
    assert [r.state for r in everything.rows] == [r.state for r in grid.rows]
