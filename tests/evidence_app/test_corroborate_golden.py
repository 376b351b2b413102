"""The port reproduces AICR's generator output on its own fixture tree, byte for byte.

``golden/corroborate/index.json`` and ``series/*.json`` were written by the Go
``tools/corroborate`` CLI on ``pkg/corroborate/testdata/gcs`` with the fixture allowlist.
Nothing needs pinning: ``meta.generatedAt`` is the newest ``attestedAt`` of the evidence
(never the clock), so the same tree always yields the same bytes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from evidence_app.corroborate import (
    PHASE_ORDER,
    Coordinate,
    RunMeta,
    Signer,
    age_days,
    age_label,
    build_from_runs,
    classify_signer,
    generate,
    is_stale,
    load_allowlist,
    make_run,
    marshal,
    rollup_recipe,
    run,
    source_slug,
    source_staleness,
    tally_phase,
)
from tests.shared_data import AICR, GOLDEN

GOLDEN_DIR = GOLDEN / "corroborate"
FIXTURE_TREE = AICR / "pkg" / "corroborate" / "testdata" / "gcs"
FIXTURE_ALLOWLIST = AICR / "pkg" / "corroborate" / "testdata" / "allowlist.yaml"
RENDERER = json.loads((GOLDEN_DIR / "vectors.json").read_text(encoding="utf-8"))[
    "rendererEvaluated"
]


def _emit(out: Path, *extra: str) -> None:
    assert run(["-in", str(FIXTURE_TREE), "-out", str(out), *extra]) == 0


@pytest.mark.parametrize("with_allowlist", [True, False], ids=["allowlist", "meta-class"])
def test_it_reproduces_the_golden_output_bytes(tmp_path: Path, with_allowlist: bool) -> None:
    # Without -allowlist the fixture's meta.json class/allowlisted agree with the allowlist,
    # so both runs must produce the golden bytes (as the Go CLI did).
    out = tmp_path / "out"
    _emit(out, *(["-allowlist", str(FIXTURE_ALLOWLIST)] if with_allowlist else []))

    assert (out / "data" / "index.json").read_bytes() == (GOLDEN_DIR / "index.json").read_bytes()
    golden_series = sorted(p.name for p in (GOLDEN_DIR / "series").glob("*.json"))
    assert sorted(p.name for p in (out / "data" / "series").glob("*.json")) == golden_series
    for name in golden_series:
        got = (out / "data" / "series" / name).read_bytes()
        assert got == (GOLDEN_DIR / "series" / name).read_bytes(), name


def test_it_stamps_generated_at_from_the_newest_attestation() -> None:
    index = generate(FIXTURE_TREE, FIXTURE_ALLOWLIST).index
    assert index["meta"]["generatedAt"] == "2026-06-20 05:00 UTC"  # run-2026-06-20T0500


def _tabs(index: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        tab["recipe"]: tab
        for group in index["groups"]
        for dashboard in group["dashboards"]
        for tab in dashboard["tabs"]
    }


def _renderer_grid_view(grid: dict[str, Any], sources: dict[str, Any]) -> dict[str, Any]:
    phases = {}
    for phase in PHASE_ORDER:
        t = tally_phase([r for r in grid["tests"] if r["phase"] == phase], sources)
        phases[phase] = {
            "state": t.state,
            "pass": t.passed,
            "fail": t.failed,
            "reported": t.reported,
            "total": t.total,
        }
    r = rollup_recipe(grid["tests"])
    return {
        "aicrVer": grid["aicrVer"],
        "goPhaseRollup": grid["phaseRollup"],
        "jsRollupPhase": phases,
        "rollupRecipe": {
            "state": r.state,
            "contested": r.contested,
            "failing": r.failing,
            "confirmed": r.confirmed,
            "single": r.single,
            "untested": r.untested,
            "reported": r.reported,
        },
    }


def test_it_matches_the_renderer_recipe_rollups() -> None:
    index = json.loads((GOLDEN_DIR / "index.json").read_text(encoding="utf-8"))
    tabs = _tabs(index)
    for expected in RENDERER["recipeRollup"]["fixture"]:
        tab = tabs[expected["recipe"]]
        assert _renderer_grid_view(tab["combined"], index["sources"]) == expected["combined"]
        got = [_renderer_grid_view(g, index["sources"]) for g in tab["versions"]]
        assert got == expected["versions"]


def test_it_matches_the_renderer_staleness() -> None:
    index = generate(FIXTURE_TREE, FIXTURE_ALLOWLIST).index
    fixture = RENDERER["staleness"]["fixture"]
    assert index["meta"]["generatedAt"] == fixture["generatedAt"]
    got = [
        {
            "sourceId": s.source_id,
            "label": s.label,
            "latestWhen": s.latest_when,
            "ageDays": s.age_days,
            "stale": s.stale,
            "ageLabel": s.age_label,
        }
        for s in source_staleness(index)
    ]
    assert got == fixture["sources"]


@pytest.mark.parametrize("probe", RENDERER["staleness"]["probes"], ids=lambda p: repr(p))
def test_it_matches_the_renderer_staleness_probes(probe: dict[str, Any]) -> None:
    days = age_days(probe["generatedAt"], probe["latestWhen"])
    assert days == probe["ageDays"]
    assert is_stale(days) is probe["stale"]
    assert age_label(days) == probe["ageLabel"]


def test_it_classifies_every_committed_pointer_signer_with_the_real_allowlist() -> None:
    evidence = AICR / "recipes" / "evidence"
    allowlist = load_allowlist(evidence / "allowlist.yaml")
    pointers = sorted(evidence.glob("*/*/*.yaml"))
    assert pointers
    for path in pointers:
        signer = yaml.safe_load(path.read_text(encoding="utf-8"))["attestations"][0]["signer"]
        # The <src> path segment is the signer's slug, and every committed pointer is
        # community class ("none is first-party").
        assert source_slug(signer["issuer"], signer["identity"]) == path.parent.name
        c = classify_signer(allowlist, signer["issuer"], signer["identity"])
        assert (c.class_, c.allowlisted) == ("community", True), path


@pytest.mark.parametrize(
    "path",
    [AICR / "recipes/evidence/allowlist.yaml", AICR / "_index-v1/recipes/evidence/allowlist.yaml"],
    ids=["main-08", "idx-v1"],
)
def test_it_loads_the_real_allowlists(path: Path) -> None:
    allowlist = load_allowlist(path)
    issuer = "https://token.actions.githubusercontent.com"
    for cloud in ("aws", "gcp", "azure", "kind"):
        identity = f"https://github.com/NVIDIA/aicr/.github/workflows/uat-{cloud}.yaml@refs/heads/x"
        c = classify_signer(allowlist, issuer, identity)
        assert (c.class_, c.allowlisted, c.label) == ("first-party", True, f"aicr-uat-{cloud}")
    fork = "https://github.com/NVIDIA/aicr/.github/workflows/uat-aws.yaml@refs/heads/main\n"
    assert not classify_signer(allowlist, issuer, fork).allowlisted


def test_it_reproduces_the_golden_index_from_plain_runs() -> None:
    # The Django app feeds runs from database rows: build them as plain dataclasses (no
    # evidence tree reader involved) and the pure core must still give the golden bytes.
    allowlist = load_allowlist(FIXTURE_ALLOWLIST)
    runs = []
    for meta_path in sorted(FIXTURE_TREE.rglob("meta.json")):
        doc = json.loads(meta_path.read_text(encoding="utf-8"))
        statuses = {
            p.stem: {
                t["name"]: t["status"]
                for t in json.loads(p.read_text(encoding="utf-8"))["results"]["tests"]
            }
            for p in (meta_path.parent / "ctrf").glob("*.json")
        }
        meta = RunMeta(
            coordinate=Coordinate(**doc["coordinate"]),
            recipe=doc["recipe"],
            signer=Signer(
                id_hash=doc["signer"]["idHash"],
                identity=doc["signer"]["identity"],
                issuer=doc["signer"]["issuer"],
            ),
            run_id=doc["runId"],
            attested_at=doc["attestedAt"],
            aicr_version=doc["aicrVersion"],
            k8s_version=doc["k8sVersion"],
            evidence_ref=doc["evidenceRef"],
        )
        runs.append(make_run(meta, statuses, allowlist))
    result = build_from_runs(runs)
    assert marshal(result.index) == (GOLDEN_DIR / "index.json").read_bytes()
    for name, series in result.series.items():
        assert marshal(series) == (GOLDEN_DIR / "series" / f"{name}.json").read_bytes()
