"""Consensus: which signed runs count for a recipe, and the state they give it.

The one home of AICR's corroboration rules as this site applies them to its database rows.
Pages, the API, the SVG badge and the exports read consensus through this package; its API:

- state of a recipe: ``recipe_badge(recipe)`` (a listed recipe's stored ``RecipeBadge``:
  state, demo, staleness), ``consensus_grid(recipe=…).consensus.badge`` (computed);
- grid of a recipe: ``consensus_grid(recipe=…, lens=…, signers=…)`` → ``ConsensusGrid``;
- what a recipe lacks for CONFIRMED: ``RecipeConsensus.lacks_for_confirmed`` (``rules``'
  ``confirmed_lacks`` over ``corroborate.confirmed_shortfall``, the CONFIRMED rule inverted);
- states of many recipes: ``recipe_badges_computed(names=…)`` → ``ComputedBadges`` (from the
  runs: the reference), ``recipe_badges_stored`` (the same, folded from the stored grid
  columns' row tallies, ``columns``), which ``stored`` keeps in ``RecipeConsensusState``
  rows, and ``package_consensus(records, …)`` for an audit package's own records;
- which evidence counts: ``is_counted(evidence)`` (``EvidenceQuerySet.counted()``, i.e.
  ``models.counted_q``, for one row; both include ``AICR_SUPPORTED_RANGE``);
- the state names, ``STATES`` (best first) and ``STATE_DESCRIPTIONS``.

Modules: ``outcomes`` (a run's per-check results, read from its JSON), ``rules`` (which runs
count, ``recipe_consensus`` = ``fold_consensus`` of the runs' row tallies), ``columns`` (each
recipe name's stored grid columns and row tallies), ``grid`` (one recipe's grid: the default
view from the stored columns, a lens from the runs), ``badges`` (many recipes' badges),
``records`` (an audit package's consensus), ``stored`` (the stored badges and the hooks of
the services that change what they rest on). ``stored`` writes, yet lives here rather than
in ``services``: it writes nothing but its own cache of ``badges``, and a rule change and the
moments the cache must follow it are read together. Names not exported here are imported
from their module (``grid.COUNTED_COLUMNS_SHOWN``, ``outcomes.check_outcomes``).

Import direction: ``evidence_app`` depends on ``recipes_app`` (evidence is about a recipe:
``evidence_app.models`` imports ``Recipe``); this package only on its models (it reads
``Recipe.checks`` and writes ``RecipeConsensusState``). ``recipes_app`` reads
consensus only through this package (the API above, and ``stored``'s hooks: a catalog import,
expired badges before a list read); its models import nothing of ``evidence_app``, so the
model layer stays one way. The reverse edge that remains (the recipe pages show consensus)
is this named API instead of ``evidence_app.selectors`` at large; removing it would mean
moving the recipe pages or the consensus tables to another app, a larger move for no gain.
"""

from __future__ import annotations

from evidence_app.consensus.badges import ComputedBadges, recipe_badge, recipe_badges_computed
from evidence_app.consensus.grid import ConsensusGrid, consensus_grid
from evidence_app.consensus.records import package_consensus
from evidence_app.consensus.rules import (
    STATE_DESCRIPTIONS,
    STATES,
    RecipeBadge,
    RecipeConsensus,
    is_counted,
)
from evidence_app.corroborate import CONFIRMED, CONTESTED, FAILING, PARTIAL, SINGLE, UNTESTED

__all__ = [
    "CONFIRMED",
    "CONTESTED",
    "FAILING",
    "PARTIAL",
    "SINGLE",
    "STATES",
    "STATE_DESCRIPTIONS",
    "UNTESTED",
    "ComputedBadges",
    "ConsensusGrid",
    "RecipeBadge",
    "RecipeConsensus",
    "consensus_grid",
    "is_counted",
    "package_consensus",
    "recipe_badge",
    "recipe_badges_computed",
]
