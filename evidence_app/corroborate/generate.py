"""The dashboard generator: evidence tree (+ allowlist) -> ``index.json`` and series files.

Port of ``pkg/corroborate/generate.go`` and ``tools/corroborate``. ``build`` is the pure core
(admitted runs in, index/series dicts out) that the Django app can call with runs built from
database rows; ``generate`` adds the file-tree intake, ``emit`` the byte-exact writer, and
``run`` the CLI (``python -m evidence_app.corroborate -in <tree> -out <dir> [-allowlist f]``).

Model rules, in short (see ``golden/corroborate/README.md`` for the full statement):

- per recipe, each signer's runs are ordered newest first (attestedAt, then runId);
- each per-version grid uses every signer's newest run *at that AICR version* (agreement
  across versions is not reproduction); the combined grid uses each signer's single newest
  run; a row absent from the selected run is not-run (no per-row fallback to older runs);
- rows are the union of (phase, CTRF name) of the selected runs, in phase order then name;
- ``meta.generatedAt`` is the newest attestedAt, never the clock, so output is reproducible.
"""

from __future__ import annotations

import itertools
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from . import gojson
from .allowlist import Allowlist, load_allowlist
from .errors import EXIT_INVALID_INPUT, CorroborateError, ErrorCode
from .files import MAX_RUN_FILE_BYTES, read_bounded_file
from .intake import (
    ACCELERATOR_TYPES,
    INTENT_TYPES,
    OS_TYPES,
    PLATFORM_TYPES,
    SERVICE_TYPES,
    Coordinate,
    Criteria,
    RecipeAgg,
    Run,
    RunMeta,
    SkipRun,
    admit_meta,
    aggregate,
    attested_instant,
)
from .labels import format_when, format_when_date, source_label
from .states import (
    FAIL,
    NOT_RUN,
    PASS,
    PHASE_ORDER,
    SignerResult,
    bucket_status,
    compute_consensus,
    phase_rollup,
)
from .timeutil import ZERO_INSTANT, format_utc
from .versions import order_versions_newest_first

SCHEMA_VERSION = "aicr-corroboration/v1"
LINK_INSTALL = "curl -sfL https://get.aicr.run | bash"
LINK_DOCS = "https://docs.aicr.run/"
LINK_GITHUB = "https://github.com/NVIDIA/aicr"
PLATFORM_NONE = "(none)"  # the facet value of recipes without a platform
CRITERIA_AXES = ("service", "accelerator", "os", "intent", "platform")

# AICR embeds its static renderer; this port leaves rendering to the Django app and writes a
# small fixed page instead, so the output layout (and its determinism) stays the same.
RENDERER_HTML = b"""<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>AICR Evidence Corroboration</title></head>
<body>
<p>Corroboration data: <a href="data/index.json">data/index.json</a> and
<code>data/series/&lt;recipe&gt;.json</code> (schema aicr-corroboration/v1).</p>
</body>
</html>
"""

RUN_META_TYPE = gojson.Struct(
    (
        ("schemaVersion", gojson.STRING),
        (
            "coordinate",
            gojson.Struct(
                (("group", gojson.STRING), ("dashboard", gojson.STRING), ("tab", gojson.STRING))
            ),
        ),
        ("recipe", gojson.STRING),
        ("profile", gojson.STRING),
        ("profileSelection", gojson.STRING),
        (
            "signer",
            gojson.Struct(
                (
                    ("idHash", gojson.STRING),
                    ("identity", gojson.STRING),
                    ("issuer", gojson.STRING),
                    ("class", gojson.STRING),
                    ("allowlisted", gojson.BOOL),
                )
            ),
        ),
        ("runId", gojson.STRING),
        ("aicrVersion", gojson.STRING),
        ("k8sVersion", gojson.STRING),
        ("k8sConstraint", gojson.STRING),
        ("bundleDigest", gojson.STRING),
        ("evidenceRef", gojson.STRING),
        ("rekorLogIndex", gojson.Ptr(gojson.INT64)),
        ("attestedAt", gojson.STRING),
    )
)

_STRINGS = gojson.ListOf(gojson.STRING)
_SUMMARY_COUNTS = ("tests", "passed", "failed", "skipped", "pending", "other", "start", "stop")
CTRF_REPORT_TYPE = gojson.Struct(
    (
        ("reportFormat", gojson.STRING),
        ("specVersion", gojson.STRING),
        ("timestamp", gojson.STRING),
        ("generatedBy", gojson.STRING),
        (
            "results",
            gojson.Struct(
                (
                    ("tool", gojson.Struct((("name", gojson.STRING), ("version", gojson.STRING)))),
                    (
                        "summary",
                        gojson.Struct(tuple((n, gojson.INT64) for n in _SUMMARY_COUNTS)),
                    ),
                    (
                        "tests",
                        gojson.ListOf(
                            gojson.Struct(
                                (
                                    ("name", gojson.STRING),
                                    ("status", gojson.STRING),
                                    ("duration", gojson.INT64),
                                    ("suite", _STRINGS),
                                    ("message", gojson.STRING),
                                    ("stdout", _STRINGS),
                                    ("extra", gojson.MapOf(gojson.STRING)),
                                    (
                                        "runtimeProvenance",
                                        gojson.Ptr(
                                            gojson.Struct(
                                                (
                                                    ("shippedDigest", gojson.STRING),
                                                    ("derivedDigest", gojson.STRING),
                                                    ("overriddenPaths", _STRINGS),
                                                    ("inheritedPaths", _STRINGS),
                                                )
                                            )
                                        ),
                                    ),
                                )
                            )
                        ),
                    ),
                    (
                        "environment",
                        gojson.Ptr(
                            gojson.Struct(
                                (
                                    ("appName", gojson.STRING),
                                    ("appVersion", gojson.STRING),
                                    ("testEnvironment", gojson.STRING),
                                )
                            )
                        ),
                    ),
                )
            ),
        ),
    )
)


@dataclass(frozen=True)
class Summary:
    recipes: int
    sources: int
    runs: int


@dataclass
class BuildResult:
    """``index`` is data/index.json; ``series`` maps recipe name -> data/series/<name>.json."""

    index: dict[str, Any]
    series: dict[str, dict[str, Any]]
    summary: Summary
    warnings: list[str] = field(default_factory=list)


# --- per-recipe grids -----------------------------------------------------------------------


def _sorted_row_keys(seen: set[tuple[str, str]]) -> list[tuple[str, str]]:
    order = {phase: i for i, phase in enumerate(PHASE_ORDER)}
    return sorted(seen, key=lambda rk: (order.get(rk[0], 0), rk[1]))


def _add_run_rows(seen: set[tuple[str, str]], run: Run) -> None:
    for phase, by_name in run.statuses.items():
        seen.update((phase, name) for name in by_name)


def _union_rows(runs: Iterable[Run]) -> list[tuple[str, str]]:
    seen: set[tuple[str, str]] = set()
    for run in runs:
        _add_run_rows(seen, run)
    return _sorted_row_keys(seen)


def _compute_grid(
    row_keys: Sequence[tuple[str, str]],
    signer_ids: Sequence[str],
    latest: Mapping[str, Run],
    grid_signers: set[str],
) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """Bake one grid: per row, every selected run's bucket feeds consensus; pass/fail signers
    are listed (not-run ones render as empty cells) and recorded in ``grid_signers``."""
    rows: list[dict[str, Any]] = []
    states_by_phase: dict[str, list[str]] = {}
    for phase, name in row_keys:
        results: list[SignerResult] = []
        signers: list[dict[str, Any]] = []
        for sid in signer_ids:
            run = latest[sid]
            status = run.statuses.get(phase, {}).get(name)
            res = NOT_RUN if status is None else bucket_status(status)
            # Anti-sybil: the distinct-signer key is the verified (issuer, identity).
            results.append(SignerResult(run.signer_key, run.allowlisted, res))
            if res not in (PASS, FAIL):
                continue
            signers.append(
                {
                    "src": sid,
                    "result": res,
                    "aicrVer": run.meta.aicr_version,
                    "k8sVer": run.meta.k8s_version,
                    "when": format_when(run.meta.attested_at),
                    "build": run.meta.run_id,
                    "evidenceRef": run.meta.evidence_ref,
                }
            )
            grid_signers.add(sid)
        c = compute_consensus(results)
        states_by_phase.setdefault(phase, []).append(c.state)
        rows.append(
            {
                "phase": phase,
                "name": name,
                "consensus": c.state,
                "reported": c.reported,
                "signers": signers,
            }
        )
    return rows, states_by_phase


def _grid(aicr_ver: str, rows: list[dict[str, Any]], states: dict[str, list[str]]) -> dict:
    return {"aicrVer": aicr_ver, "phaseRollup": phase_rollup(states), "tests": rows}


def _newest_first(runs: list[Run]) -> list[Run]:
    # attestedAt descending, ties by runId descending: a total, deterministic order.
    return sorted(runs, key=lambda r: (r.attested, r.meta.run_id), reverse=True)


def _source_record(run: Run) -> dict[str, Any]:
    return {
        "label": run.label,
        "class": run.class_,
        "allowlisted": run.allowlisted,
        "signerId": run.meta.signer.identity,
    }


def build_recipe(
    agg: RecipeAgg, sources: dict[str, dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, Any], int]:
    """One recipe's tab (grids) and series; registers its signers in ``sources`` (first
    write wins). Returns ``(tab, series, run_count)``."""
    # Pre-reduce by the verified identity so one signer submitting under two idHashes
    # renders as one source with one latest result.
    by_identity: dict[str, list[Run]] = {}
    for runs in agg.by_signer.values():
        for r in runs:
            by_identity.setdefault(r.signer_key, []).append(r)
    runs_by_id: dict[str, list[Run]] = {}
    run_count = 0
    for runs in by_identity.values():
        ordered = _newest_first(runs)
        runs_by_id[ordered[0].source_id] = ordered
        run_count += len(ordered)

    signer_ids = sorted(runs_by_id)
    latest_any = {sid: runs_by_id[sid][0] for sid in signer_ids}
    for sid in signer_ids:
        sources.setdefault(sid, _source_record(latest_any[sid]))

    ver_latest: dict[str, dict[str, Run]] = {}
    ver_newest: dict[str, int] = {}
    for sid, runs in runs_by_id.items():
        for r in runs:  # newest first: the first run seen at a version is the newest there
            v = r.meta.aicr_version
            ver_latest.setdefault(v, {}).setdefault(sid, r)
            if r.attested > ver_newest.get(v, ZERO_INSTANT):
                ver_newest[v] = r.attested

    grid_signers: set[str] = set()
    versions = []
    for v in order_versions_newest_first(ver_latest, ver_newest):
        latest = ver_latest[v]
        rows, states = _compute_grid(
            _union_rows(latest.values()), sorted(latest), latest, grid_signers
        )
        versions.append(_grid(v, rows, states))

    # The combined ("all versions") grid folds each signer's single latest run; a throwaway
    # signer set keeps the series columns those of the per-version grids.
    rows, states = _compute_grid(_union_rows(latest_any.values()), signer_ids, latest_any, set())
    tab: dict[str, Any] = {"recipe": agg.name, "coord": agg.criteria.as_coord()}
    if agg.profile:
        tab["profile"] = agg.profile
    if agg.profile_selection:
        tab["profileSelection"] = agg.profile_selection
    tab["versions"] = versions
    tab["combined"] = _grid("", rows, states)

    all_runs = [r for runs in runs_by_id.values() for r in runs]
    series = build_series(agg.name, grid_signers, _union_rows(all_runs), runs_by_id)
    return tab, series, run_count


def _flatten(run: Run) -> dict[str, str]:
    out: dict[str, str] = {}
    for phase in PHASE_ORDER:
        for name, status in run.statuses.get(phase, {}).items():
            out[name] = bucket_status(status)
    return out


def build_series(
    recipe: str,
    grid_signers: Iterable[str],
    row_keys: Sequence[tuple[str, str]],
    runs_by_id: Mapping[str, Sequence[Run]],
) -> dict[str, Any]:
    """The per-source build history of every signer that has a pass/fail in some grid; rows
    are the union over ALL builds, so a test that only ran in an older build keeps its row."""
    names: list[str] = []
    rows: list[dict[str, str]] = []
    seen: set[str] = set()
    for phase, name in row_keys:  # first phase wins for a name present in several phases
        if name not in seen:
            seen.add(name)
            names.append(name)
            rows.append({"name": name, "phase": phase})
    sorted_names = sorted(names)

    builds: dict[str, list[dict[str, Any]]] = {}
    health: dict[str, dict[str, Any]] = {}
    for sid in sorted(grid_signers):
        cols = []
        for i, run in enumerate(runs_by_id[sid]):
            flat = _flatten(run)
            cols.append(
                {
                    "id": run.meta.run_id,
                    "aicrVer": run.meta.aicr_version,
                    "k8sVer": run.meta.k8s_version,
                    "when": format_when_date(run.meta.attested_at),
                    "newest": i == 0,
                    "evidenceRef": run.meta.evidence_ref,
                    "results": {
                        n: flat[n] if flat.get(n) in (PASS, FAIL) else NOT_RUN for n in sorted_names
                    },
                }
            )
        builds[sid] = cols
        health[sid] = compute_health(cols, names)
    return {"recipe": recipe, "rows": rows, "builds": builds, "health": health}


def compute_health(cols: Sequence[Mapping[str, Any]], names: Sequence[str]) -> dict[str, Any]:
    """Build-column health: newest fully passing build and the flip rate between builds."""
    last_pass = ""
    for c in cols:  # newest first
        results = [c["results"].get(n) for n in names]
        if any(r in (PASS, FAIL) for r in results) and FAIL not in results:
            last_pass = c["id"]
            break
    flips = pairs = 0
    for n in names:
        for a_col, b_col in itertools.pairwise(cols):
            a, b = a_col["results"].get(n), b_col["results"].get(n)
            if a in (PASS, FAIL) and b in (PASS, FAIL):
                pairs += 1
                flips += a != b
    flake = (flips * 100 + pairs // 2) // pairs if pairs else 0  # rounded, integer math
    return {"flakePct": flake, "lastPassBuild": last_pass, "builds": len(cols)}


# --- index ----------------------------------------------------------------------------------


def _rank(order: Sequence[str], value: str) -> int:
    try:
        return order.index(value)
    except ValueError:
        return len(order) + 1  # unknown values sort after the canonical ones


def _assemble_groups(built: Sequence[tuple[Coordinate, dict[str, Any]]]) -> list[dict]:
    group_map: dict[str, dict[str, dict[str, Any]]] = {}
    for coord, tab in built:
        dashes = group_map.setdefault(coord.group, {})
        da = dashes.setdefault(
            coord.dashboard,
            {"accelerator": tab["coord"]["accelerator"], "os": tab["coord"]["os"], "tabs": []},
        )
        da["tabs"].append(tab)
    groups = []
    for svc in sorted(group_map, key=lambda s: (_rank(SERVICE_TYPES, s), s)):
        dashes = group_map[svc]
        dashboards = []
        for dk in sorted(
            dashes,
            key=lambda k: (
                _rank(ACCELERATOR_TYPES, dashes[k]["accelerator"]),
                _rank(OS_TYPES, dashes[k]["os"]),
                k,
            ),
        ):
            da = dashes[dk]
            da["tabs"].sort(key=lambda t: t["coord"]["intent"] + "-" + t["coord"]["platform"])
            dashboards.append(da)
        groups.append({"service": svc, "dashboards": dashboards})
    return groups


def _criteria_values(present: Mapping[str, set[str]]) -> dict[str, list[str]]:
    canonical = {
        "service": SERVICE_TYPES,
        "accelerator": ACCELERATOR_TYPES,
        "os": OS_TYPES,
        "intent": INTENT_TYPES,
        "platform": (*PLATFORM_TYPES, PLATFORM_NONE),
    }
    out = {}
    for axis in sorted(CRITERIA_AXES):
        seen = present[axis]
        ordered = [v for v in canonical[axis] if v in seen]
        out[axis] = ordered + sorted(seen - set(ordered))
    return out


def _record_present(present: dict[str, set[str]], c: Criteria) -> None:
    present["service"].add(c.service)
    present["accelerator"].add(c.accelerator)
    present["os"].add(c.os)
    present["intent"].add(c.intent)
    present["platform"].add(c.platform or PLATFORM_NONE)


def build(recipes: Mapping[str, RecipeAgg]) -> BuildResult:
    """The consensus model of aggregated recipes: index.json plus per-recipe series."""
    sources: dict[str, dict[str, Any]] = {}
    series_by_recipe: dict[str, dict[str, Any]] = {}
    present: dict[str, set[str]] = {axis: set() for axis in CRITERIA_AXES}
    built: list[tuple[Coordinate, dict[str, Any]]] = []
    total_runs = 0
    for key in sorted(recipes):
        agg = recipes[key]
        tab, series, run_count = build_recipe(agg, sources)
        total_runs += run_count
        series_by_recipe[agg.name] = series
        built.append((agg.coord, tab))
        _record_present(present, agg.criteria)
    groups = _assemble_groups(built)

    newest = max(
        (r.attested for agg in recipes.values() for rs in agg.by_signer.values() for r in rs),
        default=ZERO_INSTANT,
    )
    meta: dict[str, Any] = {
        "links": {"install": LINK_INSTALL, "docs": LINK_DOCS, "github": LINK_GITHUB},
        "counts": {"recipes": len(built), "csps": len(groups), "sources": len(sources)},
    }
    if newest > ZERO_INSTANT:  # omitempty: no run, no stamp (never the clock)
        meta["generatedAt"] = format_utc(newest, with_time=True)
    index = {
        "schema": SCHEMA_VERSION,
        "meta": meta,
        "criteria": _criteria_values(present),
        "sources": {sid: sources[sid] for sid in sorted(sources)},
        "groups": groups,
    }
    summary = Summary(recipes=len(built), sources=len(sources), runs=total_runs)
    return BuildResult(index=index, series=series_by_recipe, summary=summary)


def build_from_runs(runs: Iterable[Run], warnings: list[str] | None = None) -> BuildResult:
    """``aggregate`` + ``build`` over already-admitted runs (e.g. from database rows)."""
    result = build(aggregate(runs, warnings))
    if warnings is not None:
        result.warnings = warnings
    return result


# --- file-tree intake -----------------------------------------------------------------------


def _walk_meta_paths(root: Path) -> list[str]:
    # Like filepath.WalkDir: symlinked directories are not followed, and a symlink named
    # meta.json is collected (then refused by the bounded reader).
    found: list[str] = []
    stack = [str(root)]
    while stack:
        current = stack.pop()
        try:
            with os.scandir(current) as it:
                entries = list(it)
        except OSError as exc:
            raise CorroborateError(ErrorCode.INTERNAL, f"walk input dir: {exc}") from exc
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
            elif entry.name == "meta.json":
                found.append(entry.path)
    return sorted(found)


def _read_json(path: Path, typ: Any, what: str) -> Any:
    data = read_bounded_file(path, MAX_RUN_FILE_BYTES)
    try:
        return gojson.decode(data, typ)
    except gojson.JSONTypeError as exc:
        raise CorroborateError(ErrorCode.INVALID_REQUEST, f"parse {what} {path}: {exc}") from exc


def load_run(
    meta_path: Path, allowlist: Allowlist | None, warnings: list[str] | None = None
) -> Run:
    """Parse one run directory (raises ``SkipRun`` to drop it, ``CorroborateError`` to abort)."""
    meta = RunMeta.from_json(_read_json(meta_path, RUN_META_TYPE, "meta"))
    class_, allowlisted = admit_meta(meta, allowlist, warnings)
    statuses: dict[str, dict[str, str]] = {}
    for phase in PHASE_ORDER:
        phase_path = meta_path.parent / "ctrf" / f"{phase}.json"
        try:
            os.stat(phase_path)
        except FileNotFoundError:
            continue  # a phase the run did not produce is simply absent
        except OSError as exc:
            raise CorroborateError(ErrorCode.INTERNAL, f"stat {phase_path}: {exc}") from exc
        report = _read_json(phase_path, CTRF_REPORT_TYPE, "ctrf")
        statuses[phase] = {t["name"]: t["status"] for t in report["results"]["tests"]}
    instant = attested_instant(meta, warnings)
    label = source_label(class_, meta.signer.identity, meta.signer.id_hash)
    return Run(meta, instant, class_, allowlisted, label, statuses)


def collect_runs(
    input_dir: Path, allowlist: Allowlist | None, warnings: list[str] | None = None
) -> list[Run]:
    """Every admitted run under ``input_dir``, in sorted meta.json path order."""
    try:
        st = os.stat(input_dir)
    except FileNotFoundError as exc:
        raise CorroborateError(
            ErrorCode.INVALID_REQUEST, f"input dir not found: {input_dir}"
        ) from exc
    except OSError as exc:
        # A permission or I/O error is not "not found": surface it as operational.
        raise CorroborateError(ErrorCode.INTERNAL, f"stat input dir {input_dir}: {exc}") from exc
    if not stat.S_ISDIR(st.st_mode):
        raise CorroborateError(
            ErrorCode.INVALID_REQUEST, f"input dir is not a directory: {input_dir}"
        )
    runs = []
    for meta_path in _walk_meta_paths(input_dir):
        try:
            runs.append(load_run(Path(meta_path), allowlist, warnings))
        except SkipRun:
            continue
    return runs


def generate(
    input_dir: str | os.PathLike[str], allowlist_path: str | os.PathLike[str] | None = None
) -> BuildResult:
    """Read the source-keyed evidence tree and compute the dashboard data (no writing).

    With ``allowlist_path`` each signer's class is re-derived from its verified identity;
    without it the ``class``/``allowlisted`` of ``meta.json`` are trusted as written by the
    trusted ingest job.
    """
    allowlist = load_allowlist(allowlist_path) if allowlist_path else None
    warnings: list[str] = []
    runs = collect_runs(Path(input_dir), allowlist, warnings)
    return build_from_runs(runs, warnings)


# --- output ---------------------------------------------------------------------------------


def emit(output_dir: str | os.PathLike[str], result: BuildResult) -> None:
    """Write ``index.html`` and ``data/{index.json,series/*.json}`` deterministically.

    The tree is staged in a sibling temporary directory and swapped in only when complete,
    so a failure never leaves a half-written dashboard and stale series files never linger.
    """
    out = Path(output_dir)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".corroborate-emit-", dir=out.parent))
    except OSError as exc:
        raise CorroborateError(ErrorCode.INTERNAL, f"create staging dir: {exc}") from exc
    try:
        staging.chmod(0o755)  # mkdtemp creates 0700; the published tree is world-readable
        series_dir = staging / "data" / "series"
        series_dir.mkdir(parents=True)
        (staging / "data" / "index.json").write_bytes(gojson.marshal_indent(result.index))
        for name, series in result.series.items():
            (series_dir / f"{name}.json").write_bytes(gojson.marshal_indent(series))
        (staging / "index.html").write_bytes(RENDERER_HTML)
        if out.is_dir() and not out.is_symlink():
            shutil.rmtree(out)
        elif out.exists() or out.is_symlink():
            out.unlink()
        staging.rename(out)
    except (OSError, ValueError) as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise CorroborateError(ErrorCode.INTERNAL, f"emit {out}: {exc}") from exc


def marshal(value: Any) -> bytes:
    """The generator's JSON bytes (Go ``MarshalIndent`` + trailing newline)."""
    return gojson.marshal_indent(value)


# --- CLI ------------------------------------------------------------------------------------

_FLAGS = {"in": "", "out": "dist/corroborate", "allowlist": ""}


class _FlagError(Exception):
    pass


def _parse_flags(args: Sequence[str]) -> dict[str, str]:
    """Go ``flag`` semantics: ``-name value``, ``-name=value`` or ``--name``; parsing stops at
    the first non-flag or ``--``; an unknown flag, ``-h`` or a missing value is an error."""
    values = dict(_FLAGS)
    i = 0
    while i < len(args):
        arg = args[i]
        if len(arg) < 2 or arg[0] != "-":
            break
        if arg == "--":
            break
        name = arg[2:] if arg.startswith("--") else arg[1:]
        if name == "" or name[0] in "-=":
            raise _FlagError(f"bad flag syntax: {arg}")
        value = None
        if "=" in name:
            name, value = name.split("=", 1)
        if name not in values:
            raise _FlagError(f"flag provided but not defined: -{name}")
        if value is None:
            if i + 1 >= len(args):
                raise _FlagError(f"flag needs an argument: -{name}")
            i += 1
            value = args[i]
        values[name] = value
        i += 1
    return values


def run(args: Sequence[str], stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> int:
    """``tools/corroborate`` ``parseAndRun``: returns the process exit code (0 success, 2 flag
    parse error or invalid input, 3 not found, 8 internal, 1 other)."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    try:
        flags = _parse_flags(args)
    except _FlagError as exc:
        print(exc, file=stderr)
        print("Usage: corroborate -in <evidence-dir> -out <dir> [-allowlist <f>]", file=stderr)
        return EXIT_INVALID_INPUT
    try:
        if flags["in"] == "":
            raise CorroborateError(ErrorCode.INVALID_REQUEST, "missing required -in <evidence-dir>")
        result = generate(flags["in"], flags["allowlist"] or None)
        emit(flags["out"], result)
    except CorroborateError as exc:
        print(f"corroborate: {exc}", file=stderr)
        return exc.exit_code
    except OSError as exc:  # an unexpected filesystem failure is an internal error
        print(f"corroborate: {exc}", file=stderr)
        return CorroborateError(ErrorCode.INTERNAL, str(exc)).exit_code
    s = result.summary
    print(
        f"corroborate: wrote {flags['out']} ({s.recipes} recipes, {s.sources} sources, "
        f"{s.runs} runs)",
        file=stdout,
    )
    return 0


def main() -> None:
    raise SystemExit(run(sys.argv[1:]))
