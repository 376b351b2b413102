"""The consensus an audit package states, computed from its records alone.

The same function runs when the package is written and when ``verify_audit`` re-checks it, so
an auditor can see that the stated states follow from the records (and, through the manifest,
that nobody changed either). It is the site's rule (``rules.recipe_consensus``: AICR's
corroboration port) applied to the package's records: per recipe name, the newest counted run
of each signer; the declared checks are those of the recipe the newest of those runs binds to.
A package exported with filters states the consensus of what it holds, not the site's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from evidence_app.consensus.rules import GRID_PHASES, Run, declared_checks, recipe_consensus


class NewestCounted:
    """The newest counted run of each (recipe name, signer) among the records ``add`` is
    given: all ``package_consensus`` reads, kept as the records stream past."""

    def __init__(self) -> None:
        self.by_recipe: dict[str, dict[str, Mapping[str, Any]]] = {}

    def add(self, record: Mapping[str, Any]) -> None:
        if not record.get("counted"):
            return
        by_signer = self.by_recipe.setdefault(str(record["recipe"]), {})
        slug = str(record["signer_slug"])
        current = by_signer.get(slug)
        if current is None or (record["attested_at"], record["id"]) > (
            current["attested_at"],
            current["id"],
        ):
            by_signer[slug] = record

    def runs(self) -> list[Mapping[str, Any]]:
        return [run for by_signer in self.by_recipe.values() for run in by_signer.values()]


def _newest_counted_runs(
    records: Iterable[Mapping[str, Any]],
) -> dict[str, dict[str, Mapping[str, Any]]]:
    newest = NewestCounted()
    for record in records:
        newest.add(record)
    return newest.by_recipe


def package_consensus(
    records: Iterable[Mapping[str, Any]], declared: Mapping[str, Any]
) -> dict[str, Any]:
    """``{recipe name: {state, phases, rows, includes_demo, runs}}``; ``declared``: recipe
    digest → that recipe's declared checks (``Recipe.checks``)."""
    out: dict[str, Any] = {}
    for name, by_signer in sorted(_newest_counted_runs(records).items()):
        runs = sorted(by_signer.values(), key=lambda r: (r["attested_at"], r["id"]), reverse=True)
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
        out[name] = {
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
    return out
