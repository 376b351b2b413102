"""The 107 Go test vectors of AICR's pkg/corroborate + tools/corroborate against the port.

One parametrised test per vector group of ``golden/corroborate/vectors.json`` (ids are the
vector ids). ``scenario`` and ``fixture`` vectors evaluate the vectors' selector checks on the
port's generated index/series; ``scenario`` vectors are also compared in full (and byte for
byte) with the Go CLI's ``observed`` output on the same tree.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from evidence_app.corroborate import (
    AllowlistError,
    Coordinate,
    Run,
    RunMeta,
    Signer,
    SignerResult,
    aggregate,
    bucket_status,
    classify_signer,
    compatible_meta_schema,
    compute_consensus,
    criteria_from_coordinate,
    format_when,
    format_when_date,
    generate,
    load_allowlist,
    marshal,
    order_versions_newest_first,
    parse_rfc3339,
    priority_of,
    rollup_phase,
    run,
    safe_recipe_slug,
    source_label,
    source_slug,
)
from tests.shared_data import AICR, GOLDEN

VECTORS = json.loads((GOLDEN / "corroborate" / "vectors.json").read_text(encoding="utf-8"))
GROUPS: dict[str, list[dict[str, Any]]] = {
    name: group["vectors"] for name, group in VECTORS["groups"].items()
}
FIXTURE_TREE = AICR / "pkg" / "corroborate" / "testdata" / "gcs"


def vectors(group: str) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("vector", GROUPS[group], ids=[v["id"] for v in GROUPS[group]])


def test_it_covers_every_vector_group() -> None:
    tested = {
        "consensus", "bucketStatus", "phaseRollup", "statePriority", "versionOrder",
        "scenario", "fixture", "classifySigner", "allowlistLoad", "metaSchema", "intake",
        "labels", "cli",
    }  # fmt: skip
    assert set(GROUPS) == tested
    assert sum(len(v) for v in GROUPS.values()) == VECTORS["counts"]["total"] == 107


# --- selector grammar (vectors.json conventions.selectors) ---------------------------------

_SEGMENT = re.compile(r"\.([^.\[]+)|\[([^\]]*)\]")


def _find_tab(index: dict[str, Any], recipe: str) -> dict[str, Any]:
    for group in index["groups"]:
        for dashboard in group["dashboards"]:
            for tab in dashboard["tabs"]:
                if tab["recipe"] == recipe:
                    return tab
    raise AssertionError(f"no tab for recipe {recipe}")


def _only(items: list[Any], what: str) -> Any:
    assert len(items) == 1, f"{what}: {len(items)} matches"
    return items[0]


def _step(value: Any, field: str | None, key: str | None) -> Any:
    if field is not None:
        return value[field]
    assert key is not None
    if isinstance(value, list):
        return value[int(key)]
    return value[key]


def select(selector: str, index: dict[str, Any], series: dict[str, Any]) -> Any:
    """Evaluate one selector; ``[*]`` maps the rest of the path over a list or map values."""
    m = re.match(r"(index|tab|series)(?:\[([^\]]*)\])?", selector)
    assert m, selector
    root, arg = m.groups()
    base = {"index": index, "tab": None, "series": None}[root]
    if root == "tab":
        base = _find_tab(index, arg)
    elif root == "series":
        base = series[arg]
    values, multi = [base], False
    tokens = _SEGMENT.findall(selector[m.end() :])
    assert "".join(f".{f}" if f else f"[{k}]" for f, k in tokens) == selector[m.end() :]
    i = 0
    while i < len(tokens):
        field, key = tokens[i][0] or None, tokens[i][1] if not tokens[i][0] else None
        nxt_key = tokens[i + 1][1] if i + 1 < len(tokens) and not tokens[i + 1][0] else None
        if field in ("version", "row", "signer") or (
            field == "rows" and nxt_key is not None and "=" in nxt_key
        ):
            assert nxt_key is not None, selector
            new = []
            for v in values:
                if field == "version":
                    new.append(_only([g for g in v["versions"] if g["aicrVer"] == nxt_key], field))
                elif field == "row":
                    phase, name = nxt_key.split("/", 1)
                    rows = [r for r in v["tests"] if (r["phase"], r["name"]) == (phase, name)]
                    new.append(_only(rows, field))
                elif field == "signer":
                    new.append(_only([s for s in v["signers"] if s["src"] == nxt_key], field))
                else:
                    name = nxt_key.split("=", 1)[1]
                    new.append(_only([r for r in v["rows"] if r["name"] == name], field))
            values, i = new, i + 2
            continue
        if field == "rowNames":
            values = [[r["name"] for r in v["tests"]] for v in values]
        elif key == "*":
            values = [e for v in values for e in (v.values() if isinstance(v, dict) else v)]
            multi = True
        else:
            values = [_step(v, field, key) for v in values]
        i += 1
    return values if multi else values[0]


def check(result: Any, op: str, value: Any) -> None:
    if op == "equals":
        assert result == value
    elif op == "length":
        assert len(result) == value
    elif op == "lengthAtLeast":
        assert len(result) >= value
    elif op == "containsAll":
        assert all(v in result for v in value), (result, value)
    elif op == "notContains":
        assert value not in result
    elif op == "anyContains":
        assert any(value in r for r in result), (result, value)
    elif op == "hasKeys":
        assert all(k in result for k in value), (result, value)
    elif op == "noneContainsSubstring":
        assert not any(value in r for r in result), (result, value)
    else:
        raise AssertionError(f"unknown op {op}")


def run_checks(expected: dict[str, Any], index: dict[str, Any], series: dict[str, Any]) -> None:
    for c in expected.get("checks", ()):
        result = select(c["select"], index, series)
        try:
            check(result, c["op"], c["value"])
        except AssertionError as exc:
            raise AssertionError(f"{c['select']} {c['op']} {c['value']!r}: got {result!r}") from exc


def assert_summary(expected: dict[str, Any], summary: Any) -> None:
    for k, v in expected.get("summary", {}).items():
        assert getattr(summary, k) == v, k


# --- pure functions ---------------------------------------------------------------------------


@vectors("consensus")
def test_it_computes_row_consensus(vector: dict[str, Any]) -> None:
    signers = [
        SignerResult(s["signerId"], s["allowlisted"], s["result"])
        for s in vector["input"]["signers"]
    ]
    c = compute_consensus(signers)
    got = {"state": c.state, "passAllow": c.pass_allow, "failAllow": c.fail_allow}
    assert got | {"reported": c.reported} == vector["expected"]


@vectors("bucketStatus")
def test_it_buckets_ctrf_status(vector: dict[str, Any]) -> None:
    assert bucket_status(vector["input"]["status"]) == vector["expected"]["result"]


@vectors("phaseRollup")
def test_it_rolls_up_phases(vector: dict[str, Any]) -> None:
    assert rollup_phase(vector["input"]["states"]) == vector["expected"]["state"]


@vectors("statePriority")
def test_it_ranks_unknown_states_last(vector: dict[str, Any]) -> None:
    assert priority_of(vector["input"]["state"]) == vector["expected"]["rank"]


@vectors("versionOrder")
def test_it_orders_versions_newest_first(vector: dict[str, Any]) -> None:
    newest = {
        v: parse_rfc3339(at) for v, at in vector["input"]["newestAttestedAtByVersion"].items()
    }
    assert all(t is not None for t in newest.values())
    got = order_versions_newest_first(vector["input"]["versions"], newest)  # type: ignore[arg-type]
    assert got == vector["expected"]["order"]


@vectors("metaSchema")
def test_it_gates_meta_schema(vector: dict[str, Any]) -> None:
    assert (
        compatible_meta_schema(vector["input"]["schemaVersion"]) is vector["expected"]["compatible"]
    )


@vectors("labels")
def test_it_labels_sources_and_times(vector: dict[str, Any]) -> None:
    inp, expected = vector["input"], vector["expected"]
    if inp["kind"] == "sourceLabel":
        assert source_label(inp["class"], inp["identity"], inp["idHash"]) == expected["label"]
    elif inp["kind"] == "formatWhen":
        assert format_when(inp["attestedAt"]) == expected["text"]
    else:
        assert inp["kind"] == "formatWhenDate"
        assert format_when_date(inp["attestedAt"]) == expected["text"]


# --- allowlist --------------------------------------------------------------------------------


@vectors("classifySigner")
def test_it_classifies_signers(vector: dict[str, Any]) -> None:
    inp = vector["input"]
    allowlist = load_allowlist(AICR / inp["allowlist"])
    assert source_slug(inp["issuer"], inp["identity"]) == inp["sourceSlug"]
    c = classify_signer(allowlist, inp["issuer"], inp["identity"])
    assert {"class": c.class_, "allowlisted": c.allowlisted} == vector["expected"]


@vectors("allowlistLoad")
def test_it_loads_or_rejects_allowlists(vector: dict[str, Any], tmp_path: Path) -> None:
    inp = vector["input"]
    if inp["body"] is None:
        path = AICR / inp["path"]
    else:
        path = tmp_path / "allowlist.yaml"
        path.write_text(inp["body"], encoding="utf-8")
    if vector["expected"]["error"]:
        with pytest.raises(AllowlistError):
            load_allowlist(path)
    else:
        assert load_allowlist(path).schema_version == "1.0.0"


# --- intake ---------------------------------------------------------------------------------


def _intake_run(spec: dict[str, Any]) -> Run:
    # The Go test builds signerRun values directly (no issuer, no time): aggregation only
    # reads the coordinate, recipe, profile fields and the signer identity.
    meta = RunMeta(
        coordinate=Coordinate(**spec["coordinate"]),
        recipe=spec["recipe"],
        signer=Signer(id_hash=spec["signer"]["idHash"], identity=spec["signer"]["identity"]),
        profile=spec.get("profile", ""),
        profile_selection=spec.get("profileSelection", ""),
    )
    return Run(meta, 0, "community", False, "", {})


@vectors("intake")
def test_it_admits_and_aggregates_runs(vector: dict[str, Any]) -> None:
    inp, expected = vector["input"], vector["expected"]
    if inp["kind"] == "safeRecipeSlug":
        assert safe_recipe_slug(inp["slug"]) is expected["safe"]
    elif inp["kind"] == "criteriaFromCoordinate":
        if expected["error"]:
            with pytest.raises(ValueError):  # noqa: PT011 - any inversion failure
                criteria_from_coordinate(Coordinate(**inp["coordinate"]))
        else:
            crit = criteria_from_coordinate(Coordinate(**inp["coordinate"]))
            assert {
                "service": crit.service,
                "accelerator": crit.accelerator,
                "os": crit.os,
                "intent": crit.intent,
                "platform": crit.platform,
            } == expected["criteria"]
    else:
        assert inp["kind"] == "aggregate"
        warnings: list[str] = []
        aggs = aggregate([_intake_run(r) for r in inp["runs"]], warnings)
        if "aggregateKeys" in expected:
            assert sorted(aggs) == sorted(expected["aggregateKeys"])
            assert not set(expected["skippedKeys"]) & set(aggs)
            assert len(warnings) == len(expected["skippedKeys"])  # skipped, never aborted
        else:
            got = {
                k: {"profile": a.profile, "platform": a.criteria.platform} for k, a in aggs.items()
            }
            assert got == expected["aggregates"]


# --- generator ------------------------------------------------------------------------------


def _write_tree(root: Path, runs: list[dict[str, Any]]) -> None:
    for r in runs:
        run_dir = root / r["dir"]
        (run_dir / "ctrf").mkdir(parents=True)
        (run_dir / "meta.json").write_text(json.dumps(r["meta"]), encoding="utf-8")
        for phase, report in r["ctrf"].items():
            (run_dir / "ctrf" / f"{phase}.json").write_text(json.dumps(report), encoding="utf-8")


def _read_output(out: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    index = json.loads((out / "data" / "index.json").read_text(encoding="utf-8"))
    series = {
        p.stem: json.loads(p.read_text(encoding="utf-8"))
        for p in sorted((out / "data" / "series").glob("*.json"))
    }
    return index, series


@vectors("scenario")
def test_it_generates_scenarios(vector: dict[str, Any], tmp_path: Path) -> None:
    inp, expected, observed = vector["input"], vector["expected"], vector["observed"]
    assert inp["allowlist"] is None
    tree, out = tmp_path / "tree", tmp_path / "out"
    tree.mkdir()
    _write_tree(tree, inp["runs"])

    stdout = io.StringIO()
    assert run(["-in", str(tree), "-out", str(out)], stdout, io.StringIO()) == observed["exitCode"]
    assert stdout.getvalue() == observed["stdout"].replace("<out>", str(out)) + "\n"
    result = generate(tree)
    assert result.warnings == observed["warnings"]
    assert vars(result.summary) == observed["summary"]
    assert_summary(expected, result.summary)

    index, series = _read_output(out)
    assert index == observed["index"]
    assert series == observed["series"]
    # Byte-exact: the Go CLI's output re-marshalled in its own key order is our file.
    assert (out / "data" / "index.json").read_bytes() == marshal(observed["index"])
    for name, doc in observed["series"].items():
        assert (out / "data" / "series" / f"{name}.json").read_bytes() == marshal(doc)
    run_checks(expected, index, series)


@vectors("fixture")
def test_it_generates_the_fixture_tree(vector: dict[str, Any], tmp_path: Path) -> None:
    inp, expected = vector["input"], vector["expected"]
    assert AICR / inp["tree"] == FIXTURE_TREE
    allowlist = AICR / inp["allowlist"] if inp["allowlist"] else None
    if "byteIdenticalAcrossRuns" in expected:
        outs = [tmp_path / "a", tmp_path / "b"]
        for out in outs:
            args = ["-in", str(FIXTURE_TREE), "-out", str(out)]
            assert run([*args, "-allowlist", str(allowlist)] if allowlist else args) == 0
        for rel in expected["byteIdenticalAcrossRuns"]:
            assert (outs[0] / rel).read_bytes() == (outs[1] / rel).read_bytes(), rel
        return
    result = generate(FIXTURE_TREE, allowlist)
    assert_summary(expected, result.summary)
    run_checks(expected, result.index, result.series)


@vectors("cli")
def test_it_runs_the_cli(vector: dict[str, Any], tmp_path: Path) -> None:
    args = [
        str(tmp_path) + a.removeprefix("<tmp>")
        if a.startswith("<tmp>")
        else str(AICR / a)
        if a.startswith("pkg/")
        else a
        for a in vector["input"]["args"]
    ]
    code = run(args, io.StringIO(), io.StringIO())
    expected = vector["expected"]
    if "exitCode" in expected:
        assert code == expected["exitCode"]
    if "error" in expected:
        assert (code != 0) is expected["error"]
    if "files" in expected:
        assert code == 0
        assert (tmp_path / "index.html").is_file()
        assert (tmp_path / "data" / "index.json").is_file()
        assert list((tmp_path / "data" / "series").glob("*.json"))
