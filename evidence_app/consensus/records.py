"""The consensus an audit package states, computed from its records alone.

The same function runs when the package is written and when ``verify_audit`` re-checks it, so
an auditor can see that the stated states follow from the records (and, through the manifest,
that nobody changed either). It is the site's rule (``rules.recipe_consensus``: AICR's
corroboration port) applied to the package's records: per recipe name, the newest counted run
of each signer; the declared checks are those of the recipe the newest of those runs binds to.
A package exported with filters states the consensus of what it holds, not the site's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

from evidence_app.consensus.rules import GRID_PHASES, Run, declared_checks, recipe_consensus


def _when(record: Mapping[str, Any]) -> tuple[datetime, int]:
    """A record's place in time, as the site orders runs (``attested_at``, then id). Its
    text is parsed, not compared: ``isoformat`` leaves out a zero microsecond, so
    ``…:00Z`` sorts after ``…:00.5Z`` as text though it is the older one."""
    return datetime.fromisoformat(record["attested_at"]), record["id"]


class NewestCounted:
    """The newest counted run of each (recipe name, signer) among the records ``add`` is
    given, kept as the records stream past: for each, its place in time and ``at``, what the
    caller reads the record back by (the record itself when not given). An audit package
    passes where the record's line is in its ``records.ndjson``, so memory holds a small
    tuple per (recipe, signer), never the runs."""

    def __init__(self) -> None:
        self.by_recipe: dict[str, dict[str, tuple[tuple[datetime, int], Any]]] = {}

    def add(self, record: Mapping[str, Any], at: Any = None) -> None:
        if not record.get("counted"):
            return
        by_signer = self.by_recipe.setdefault(str(record["recipe"]), {})
        slug = str(record["signer_slug"])
        when = _when(record)
        current = by_signer.get(slug)
        if current is None or when > current[0]:
            by_signer[slug] = (when, record if at is None else at)

    def recipes(self) -> Iterator[tuple[str, list[Any]]]:
        """Each recipe name in order, with what its runs are read back by, newest first."""
        for name in sorted(self.by_recipe):
            kept = sorted(self.by_recipe[name].values(), key=lambda k: k[0], reverse=True)
            yield name, [at for _, at in kept]


def package_consensus(
    records: Iterable[Mapping[str, Any]], declared: Mapping[str, Any]
) -> dict[str, Any]:
    """``{recipe name: {state, phases, rows, includes_demo, runs}}``; ``declared``: recipe
    digest → that recipe's declared checks (``Recipe.checks``)."""
    newest = NewestCounted()
    for record in records:
        newest.add(record)
    return package_consensus_of(newest, lambda record: record, declared)


def package_consensus_of(
    newest: NewestCounted,
    read: Callable[[Any], Mapping[str, Any]],
    declared: Mapping[str, Any],
) -> dict[str, Any]:
    """``package_consensus`` of the runs ``newest`` kept, each read back by ``read``: one
    recipe's runs at a time."""
    return {
        name: _recipe_entry([read(at) for at in kept], declared) for name, kept in newest.recipes()
    }


def _recipe_entry(runs: list[Mapping[str, Any]], declared: Mapping[str, Any]) -> dict[str, Any]:
    """One recipe's consensus from its signers' newest counted runs, newest first."""
    result = recipe_consensus(
        declared_checks(declared.get(runs[0]["recipe_digest"], {})),
        [
            Run(
                key=str(run["signer_slug"]),
                counted=True,
                simulated=bool(run["is_simulated"]),
                statuses={
                    phase: dict(checks)
                    for phase, checks in (run.get("checks") or {}).items()
                    if phase in GRID_PHASES
                },
                demo=bool(run["is_demo"]),
                stale=tuple(run.get("stale_reasons") or ()),
            )
            for run in runs
        ],
    )
    return {
        "state": result.state,
        "includes_demo": result.includes_demo,
        "runs": len(runs),
        "phases": dict(result.phase_states),
        "rows": [
            {"phase": row.key[0], "check": row.key[1], "state": row.consensus.state}
            for row in result.rows
            if row.in_rollup
        ],
    }
