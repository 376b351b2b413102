"""The consensus badges of many recipes at once: what the list page, the ``?consensus=``
filter, the home page, the SVG badge and the recipe API show.

A badge (``rules.RecipeBadge``: state, demo, staleness) is ``rules.recipe_consensus`` over the
newest counted run of each signer, the grid's own computation in its default lens (reported
and simulated runs cannot change a state, so they are not read). ``recipe_badges_computed``
computes it for many recipes in a fixed number of queries; ``consensus.stored`` keeps the
result in ``RecipeConsensusState`` rows where it changes, and ``recipe_badge`` reads a listed
recipe's stored badge back (``RecipeBadge.stored``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from evidence_app.consensus import columns as stored_columns
from evidence_app.consensus.rules import (
    RUN_FIELDS,
    RecipeBadge,
    Run,
    check_statuses,
    declared_checks,
    fold_consensus,
    is_counted,
    latest_per,
    recipe_consensus,
)
from evidence_app.models import Evidence
from evidence_app.services.staleness import stale_after_days, staleness_bulk
from recipes_app.models import Recipe, RecipeConsensusState


def recipe_badge(recipe: Recipe) -> RecipeBadge:
    """A listed recipe's stored badge (UNTESTED without counted evidence). The list reads its
    page's rows with ``select_related("consensus")``, so this costs no query per row."""
    try:
        row = recipe.consensus
    except RecipeConsensusState.DoesNotExist:
        row = None
    return RecipeBadge.stored(row)


@dataclass(frozen=True)
class ComputedBadges:
    """``recipe_badges_computed``'s answer: every recipe row's badge and when it expires."""

    badges: dict[tuple[int, str], RecipeBadge]  # (Recipe pk, name) → badge, if counted runs
    names: frozenset[str]  # the recipe names this covers (counted evidence or not)
    expires: dict[str, datetime | None]  # name → when its first fresh counted run goes stale
    unbadged_pks: frozenset[int] = frozenset()  # recipe rows of those names without a badge


# What the badges read of each selected run.
BADGE_FIELDS = (*RUN_FIELDS, "signer__source_id", "signer__counted", "signer__label")


def _recipe_rows(names: Iterable[str] | None) -> list[tuple[int, str, Any]]:
    """(pk, name, declared checks) of every recipe row called one of ``names`` (None: all)."""
    recipes = Recipe.objects.all()
    if names is not None:
        recipes = recipes.filter(name__in=sorted(set(names)))
    return list(recipes.order_by().values_list("pk", "name", "checks"))


def recipe_badges_computed(
    *, names: Iterable[str] | None = None, now: datetime | None = None
) -> ComputedBadges:
    """The full recomputation of the badges of every recipe row (any catalog version) called
    one of ``names`` (None: every recipe name): what ``stored`` keeps, and what
    the grid shows (``recipe_consensus`` over the newest counted run of each signer; reported
    and simulated runs cannot change a state, so they are not read).

    A fixed number of queries (the runs, the staleness facts, the recipes' declared checks)
    whatever the number of names or evidence rows.
    """
    now = now or timezone.now()
    rows = _recipe_rows(names)
    covered = frozenset(name for _, name, _ in rows)
    if not covered:
        return ComputedBadges(badges={}, names=covered, expires={})
    counted = Evidence.objects.counted()
    counted = counted.filter(recipe_name__in=sorted(covered)) if names is not None else counted
    # The newest run's id per (recipe, signer) first, from the index columns alone (the
    # partial ``evidence_live_latest_idx`` on PostgreSQL: no row of the recipe's older runs is
    # read), then only those rows with what the badge needs.
    newest = latest_per(counted, "recipe_name", "signer_id").values("pk")
    latest = list(
        Evidence.objects.filter(pk__in=newest)
        .select_related("signer")
        .only(*BADGE_FIELDS)
        .order_by("-attested_at", "-pk")
    )
    latest = [e for e in latest if e.recipe_name in covered]
    stale = staleness_bulk(latest, now=now) if latest else {}
    runs: dict[str, list[Run]] = {}
    ages: dict[str, list[datetime]] = {}
    stale_after = timedelta(days=stale_after_days())
    for e in latest:
        runs.setdefault(e.recipe_name, []).append(
            Run(
                key=e.signer.source_id,
                counted=is_counted(e),
                simulated=e.is_simulated,
                statuses=check_statuses(e.check_results),
                demo=e.is_demo,
                stale=tuple(reason.code for reason in stale.get(e.pk, [])),
            )
        )
        ages.setdefault(e.recipe_name, []).append(e.attested_at + stale_after)
    badges = {
        (pk, name): recipe_consensus(declared_checks(checks), runs[name]).badge
        for pk, name, checks in rows
        if name in runs
    }
    # A run turns "older than N days" once now passes attested_at + N days; the first of
    # those moments still ahead is when the stored badge stops being true.
    expires = {
        name: min((m for m in moments if m >= now), default=None) for name, moments in ages.items()
    }
    unbadged = frozenset(pk for pk, name, _ in rows if name not in runs)
    return ComputedBadges(badges=badges, names=covered, expires=expires, unbadged_pks=unbadged)


def recipe_badges_stored(
    *, names: Iterable[str] | None = None, now: datetime | None = None
) -> ComputedBadges:
    """``recipe_badges_computed``'s answer from the stored columns and row tallies
    (``consensus.columns``, which the caller has brought up to date): ``fold_consensus`` of
    each name's tallies with each recipe row's declared checks. A fixed number of queries,
    none over the evidence."""
    now = now or timezone.now()
    rows = _recipe_rows(names)
    covered = frozenset(name for _, name, _ in rows)
    if not covered:
        return ComputedBadges(badges={}, names=covered, expires={})
    # The stale summaries group the default lens's counted columns: the names they cover
    # are the names with a counted column, without a query of their own.
    stale = stored_columns.stored_stale_summaries(covered)
    counted = frozenset(stale)
    tallies = stored_columns.stored_tallies(counted)
    badges = {
        (pk, name): fold_consensus(
            declared_checks(checks), tallies.get(name, {}), stale[name]
        ).badge
        for pk, name, checks in rows
        if name in counted
    }
    unbadged = frozenset(pk for pk, name, _ in rows if name not in counted)
    return ComputedBadges(
        badges=badges,
        names=covered,
        expires=stored_columns.stored_expiry(counted, now),
        unbadged_pks=unbadged,
    )
