"""A faithful Python port of AICR's evidence corroboration (consensus), with no Django import.

Ported from NVIDIA/aicr main-08: ``pkg/corroborate`` (consensus, generator), ``tools/corroborate``
(CLI) and the classification half of ``pkg/evidence/allowlist``. Checked against the Go tests'
107 vectors and the generator's real outputs in ``shared/aicr/golden/corroborate/``.

Consensus counts **distinct allowlisted signers, never builds**; a verified signer that is not
on the allowlist is shown as a zero-weight "reported" source and never changes a state.

Public API (everything else is internal):

States (``states``)
- ``bucket_status(status) -> "pass" | "fail" | "not-run"``
- ``compute_consensus(signers: Iterable[SignerResult]) -> Consensus`` with
  ``SignerResult(signer_id, allowlisted, result)`` and
  ``Consensus(state, pass_allow, fail_allow, reported)``; ``confirmed_shortfall(consensus) ->
  ConfirmedShortfall`` (what a row lacks for CONFIRMED, the same rule read backwards)
- ``rollup_phase(states) -> str`` (worst first, ``PARTIAL``), ``phase_rollup(states_by_phase)``,
  ``priority_of(state) -> int``
- ``tally_phase(rows, sources) -> PhaseTally`` and ``rollup_recipe(rows) -> RecipeRollup``
  (the renderer's badges over index.json rows)

Versions (``versions``)
- ``order_versions_newest_first(versions, newest_attested=None) -> list[str]``,
  ``compare(v, w) -> int`` (``golang.org/x/mod/semver``)

Allowlist (``allowlist``)
- ``load_allowlist(path) -> Allowlist``, ``parse_allowlist(body: bytes) -> Allowlist``
  (raise ``AllowlistError``)
- ``source_slug(issuer, identity) -> str`` (32 hex), ``source_id(issuer, identity) -> str``
- ``classify_signer(allowlist, issuer, identity) -> Classification(class_, allowlisted, label)``

Labels and time (``labels``, ``timeutil``)
- ``source_label(class_, identity, id_hash="")``, ``format_when(attested_at)``,
  ``format_when_date(attested_at)``, ``parse_rfc3339(text) -> int | None``

Intake (``intake``)
- ``safe_recipe_slug(name)``, ``criteria_from_coordinate(Coordinate) -> Criteria``,
  ``coordinate_for(Criteria) -> Coordinate``, ``compatible_meta_schema(version)``,
  ``parse_pointer_profile(selection)``
- ``make_run(meta: RunMeta, statuses, allowlist=None, warnings=None) -> Run`` (raises
  ``SkipRun``) and ``aggregate(runs, warnings=None) -> dict[str, RecipeAgg]``

Generator (``generate``)
- ``build(recipes) -> BuildResult(index, series, summary, warnings)`` and
  ``build_from_runs(runs, warnings=None)``: the pure core, for runs from database rows
- ``build_recipe(agg, sources) -> (tab, series, run_count)``
- ``generate(input_dir, allowlist_path=None) -> BuildResult`` (evidence tree intake),
  ``emit(output_dir, result)``, ``marshal(value) -> bytes`` (Go ``MarshalIndent`` bytes)
- ``run(args, stdout=None, stderr=None) -> int``: the ``tools/corroborate`` CLI

Staleness (``staleness``, renderer-only rules)
- ``age_days(generated_at, latest_when)``, ``is_stale(days)``, ``age_label(days)``,
  ``source_staleness(index) -> list[SourceAge]``
"""

from __future__ import annotations

from .allowlist import (
    Allowlist,
    AllowlistEntry,
    Classification,
    classify_signer,
    load_allowlist,
    parse_allowlist,
    source_id,
    source_slug,
)
from .errors import AllowlistError, CorroborateError, ErrorCode
from .generate import (
    BuildResult,
    Summary,
    build,
    build_from_runs,
    build_recipe,
    emit,
    generate,
    marshal,
    run,
)
from .intake import (
    Coordinate,
    Criteria,
    RecipeAgg,
    Run,
    RunMeta,
    Signer,
    SkipRun,
    aggregate,
    compatible_meta_schema,
    coordinate_for,
    criteria_from_coordinate,
    make_run,
    parse_pointer_profile,
    safe_recipe_slug,
)
from .labels import format_when, format_when_date, source_label
from .staleness import STALE_DAYS, SourceAge, age_days, age_label, is_stale, source_staleness
from .states import (
    CONFIRMED,
    CONFIRMED_MIN_PASSES,
    CONTESTED,
    FAIL,
    FAILING,
    NOT_RUN,
    PARTIAL,
    PASS,
    PHASE_ORDER,
    PHASE_PRIORITY,
    SINGLE,
    UNTESTED,
    ConfirmedShortfall,
    Consensus,
    PhaseTally,
    RecipeRollup,
    SignerResult,
    bucket_status,
    compute_consensus,
    confirmed_shortfall,
    consensus_of_counts,
    phase_rollup,
    priority_of,
    rollup_phase,
    rollup_recipe,
    tally_phase,
)
from .timeutil import parse_rfc3339
from .versions import compare as compare_versions
from .versions import order_versions_newest_first

__all__ = [
    "CONFIRMED",
    "CONFIRMED_MIN_PASSES",
    "CONTESTED",
    "FAIL",
    "FAILING",
    "NOT_RUN",
    "PARTIAL",
    "PASS",
    "PHASE_ORDER",
    "PHASE_PRIORITY",
    "SINGLE",
    "STALE_DAYS",
    "UNTESTED",
    "Allowlist",
    "AllowlistEntry",
    "AllowlistError",
    "BuildResult",
    "Classification",
    "ConfirmedShortfall",
    "Consensus",
    "Coordinate",
    "CorroborateError",
    "Criteria",
    "ErrorCode",
    "PhaseTally",
    "RecipeAgg",
    "RecipeRollup",
    "Run",
    "RunMeta",
    "Signer",
    "SignerResult",
    "SkipRun",
    "SourceAge",
    "Summary",
    "age_days",
    "age_label",
    "aggregate",
    "bucket_status",
    "build",
    "build_from_runs",
    "build_recipe",
    "classify_signer",
    "compare_versions",
    "compatible_meta_schema",
    "compute_consensus",
    "confirmed_shortfall",
    "consensus_of_counts",
    "coordinate_for",
    "criteria_from_coordinate",
    "emit",
    "format_when",
    "format_when_date",
    "generate",
    "is_stale",
    "load_allowlist",
    "make_run",
    "marshal",
    "order_versions_newest_first",
    "parse_allowlist",
    "parse_pointer_profile",
    "parse_rfc3339",
    "phase_rollup",
    "priority_of",
    "rollup_phase",
    "rollup_recipe",
    "run",
    "safe_recipe_slug",
    "source_id",
    "source_label",
    "source_slug",
    "source_staleness",
    "tally_phase",
]
