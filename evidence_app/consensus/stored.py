"""Each recipe's consensus badge, stored and kept current where it changes.

The list page's badges and ``?consensus=`` filter read ``RecipeConsensusState`` rows (one per
recipe row with counted evidence, in every catalog version) instead of recomputing the whole
catalog on the first read after a change. A row holds ``badges.recipe_badges_stored``: the
grid's own ``fold_consensus`` of the recipe name's stored row tallies (``consensus.columns``:
the newest eligible run of each signer column, kept with the badge), with its demo and
staleness notes; it equals ``badges.recipe_badges_computed`` from the runs (the tests compare
them after every change). What it rests on, and who refreshes it:

- the recipe's counted runs: a new counted record (``evidence_stored``, from ingest), a
  withdrawal (``evidence_withdrawn``), a signer starting or stopping to count
  (``signers_changed``: allowlist published, key revoked) refresh the recipe names involved;
- the current catalog (declared checks; the recipe-changed, aicr-outdated and
  validator-catalog-outdated staleness): a new catalog version refreshes every name
  (``catalog_changed``);
- the settings (``AICR_SUPPORTED_RANGE``: which runs count; ``EVIDENCE_STALE_AFTER_DAYS``):
  they change only at a deploy, where no service runs. A full refresh records
  ``rules_fingerprint()`` in the ``ConsensusRules`` row; the expired-badge check below finds
  a different (or no) fingerprint in the same query and refreshes every badge, so no badge
  outlives the settings it was computed under (``manage.py refresh_consensus`` does the same
  at once, if a deploy wants it before the first read);
- time alone: a counted run turns "older than N days". Each row stores ``expires_at``, the
  first such moment still ahead; ``consensus_refresh_expired`` refreshes the rows past it,
  before every list read (``RecipeFilter``) and from the periodic task, so a badge is never
  shown past the moment it stopped being true.

Refreshes run inside the transaction that makes the change, under locks that order two
changes of one recipe (PostgreSQL advisory transaction locks: a shared lock on the whole set
and an exclusive one per name; a full refresh takes the whole set exclusively). The second
waits, then reads the first one's committed rows, so neither's refresh is lost. SQLite
serialises writers itself.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from datetime import datetime

from django.db import connection, transaction
from django.db.models import Exists
from django.utils import timezone

from evidence_app.consensus import columns as stored_columns
from evidence_app.consensus.badges import recipe_badges_stored
from evidence_app.consensus.rules import is_counted
from evidence_app.exports.artefact import publication_changed
from evidence_app.models import ConsensusName, Evidence, Verdict
from evidence_app.services.staleness import stale_after_days
from evidence_app.services.versions import supported_range
from recipes_app.models import Catalog, ConsensusRules, RecipeConsensusState

# Advisory lock keys (two int4 keys): the whole set, and one per recipe name.
LOCK_ALL = (0x41494352, 0)  # "AICR"
LOCK_NAME_SPACE = 0x41494353


def _lock(names: Collection[str] | None) -> None:
    """Take the refresh locks for ``names`` (None: all) until the transaction ends."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        if names is None:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", list(LOCK_ALL))
            return
        cursor.execute("SELECT pg_advisory_xact_lock_shared(%s, %s)", list(LOCK_ALL))
        # In hash order, so two refreshes of overlapping names cannot deadlock.
        cursor.execute(
            "SELECT pg_advisory_xact_lock(%s, h) FROM "
            "(SELECT DISTINCT hashtext(n) AS h FROM unnest(%s::text[]) AS n) AS locks ORDER BY h",
            [LOCK_NAME_SPACE, sorted(names)],
        )


def lock_names(names: Collection[str] | None) -> None:
    """The refresh locks for ``names`` (None: all), until the transaction ends: what a store
    of anything derived from a recipe's evidence (``releases.stored``) takes too."""
    _lock(names)


# What a stored row holds, versioned: a release that stores more (2: ``confirmed_lacks``;
# 3: the grid's columns and row tallies it is folded from, ``consensus.columns``) bumps it,
# so the first read after the deploy refreshes every row written without it.
STORED_FIELDS_VERSION = 3


def rules_fingerprint() -> str:
    """The settings a stored badge rests on, as one string (``ConsensusRules``)."""
    return (
        f"aicr-supported-range={supported_range().text};stale-after-days={stale_after_days()}"
        f";stored-fields={STORED_FIELDS_VERSION}"
    )


def _store(names: Collection[str] | None, now: datetime) -> int:
    """Fold and replace the badges of ``names`` (None: all, under the settings recorded in
    ``ConsensusRules``) from the stored columns, which the caller brought up to date; the
    caller holds the locks."""
    if names is None:
        ConsensusRules.objects.update_or_create(
            pk=ConsensusRules.SINGLETON,
            defaults={"fingerprint": rules_fingerprint(), "refreshed_at": now},
        )
    computed = recipe_badges_stored(names=names, now=now)
    # Rows of recipes that lost their last counted run go; the others are replaced in place
    # (one upsert: a counted ingest, which cannot remove a badge, deletes nothing).
    if computed.unbadged_pks:
        RecipeConsensusState.objects.filter(recipe_id__in=computed.unbadged_pks).delete()
    RecipeConsensusState.objects.bulk_create(
        [
            RecipeConsensusState(
                recipe_id=pk,
                state=badge.state,
                includes_demo=badge.includes_demo,
                counted_runs=badge.stale.counted_runs,
                stale_runs=badge.stale.stale_runs,
                stale_reasons=dict(badge.stale.reasons),
                confirmed_lacks=[lack.as_json() for lack in badge.lacks],
                expires_at=computed.expires.get(name),
                refreshed_at=now,
            )
            for (pk, name), badge in computed.badges.items()
        ],
        batch_size=500,
        update_conflicts=True,
        unique_fields=["recipe"],
        update_fields=[
            "state",
            "includes_demo",
            "counted_runs",
            "stale_runs",
            "stale_reasons",
            "confirmed_lacks",
            "expires_at",
            "refreshed_at",
        ],
    )
    return len(computed.badges)


def consensus_refresh(names: Iterable[str] | None = None, *, now: datetime | None = None) -> int:
    """Recompute and store the badges of every recipe row called one of ``names`` (None:
    every recipe), in every catalog version; returns how many rows hold a badge now."""
    wanted = None if names is None else frozenset(names)
    if wanted is not None and not wanted:
        return 0
    # No savepoint: inside a caller's transaction (ingest, withdrawal) a failure here fails
    # the whole change anyway, and the two statements a savepoint costs are per ingest.
    with transaction.atomic(savepoint=False):
        _lock(wanted)
        stored_columns.columns_rebuild(wanted)
        return _store(wanted, now or timezone.now())


def consensus_refresh_expired(
    *,
    catalog: Catalog | None = None,
    names: Collection[str] | None = None,
    now: datetime | None = None,
) -> int:
    """Refresh the rows (of ``catalog`` or of ``names``, or all) whose ``expires_at`` has
    passed: a counted run behind them has aged into staleness since; every row when the
    settings they were computed under are not the running ones (``rules_fingerprint``). One
    query when none has and the settings are the same."""
    now = now or timezone.now()
    expired = RecipeConsensusState.objects.filter(expires_at__lt=now)
    if catalog is not None:
        expired = expired.filter(recipe__catalog=catalog)
    if names is not None:
        expired = expired.filter(recipe__name__in=sorted(names))
    state = (
        ConsensusRules.objects.filter(pk=ConsensusRules.SINGLETON)
        .annotate(any_expired=Exists(expired))
        .values_list("fingerprint", "any_expired")
        .first()
    )
    if state is None or state[0] != rules_fingerprint():
        return _refresh_for_rules(now)
    if not state[1]:
        return 0
    names = frozenset(expired.values_list("recipe__name", flat=True))
    if not names:
        return 0
    with transaction.atomic():
        _lock(names)
        # Another request may have refreshed some while this one waited for the locks.
        still = frozenset(
            RecipeConsensusState.objects.filter(
                expires_at__lt=now, recipe__name__in=sorted(names)
            ).values_list("recipe__name", flat=True)
        )
        if not still:
            return 0
        stored_columns.columns_age(still, now)  # only time moved: the same runs, older
        return _store(still, now)


def _refresh_for_rules(now: datetime) -> int:
    """Every badge again, under the running settings (the stored ones differ or are unknown)."""
    with transaction.atomic():
        _lock(None)
        # Another process may have refreshed them while this one waited for the lock.
        if ConsensusRules.objects.filter(
            pk=ConsensusRules.SINGLETON, fingerprint=rules_fingerprint()
        ).exists():
            return 0
        stored_columns.columns_rebuild(None)  # the supported range picks the columns
        return _store(None, now)


# --- the hooks of the services that change what a badge rests on -----------------------------


def _refreshed(names: Collection[str] | None, columns: Callable[[], bool]) -> None:
    """In one transaction under the locks of ``names`` (None: all): bring the stored columns
    up to date (``columns``: whether a counted one moved), the badges when one did, and the
    release profile statuses."""
    from evidence_app.releases.stored import profiles_refresh  # it reads this module's locks

    with transaction.atomic(savepoint=False):
        _lock(names)
        if columns():
            _store(names, timezone.now())
        profiles_refresh(names)


def _moves_a_release(evidence: Evidence) -> bool:
    """Whether a new record can change a release profile's status or sentence: a counted
    run, or a live simulated, demo or counted-signer one that the "not yet run on hardware"
    sentence counts (``releases.status._not_run_reason``)."""
    return evidence.is_simulated or evidence.is_demo or evidence.signer.counted


def evidence_stored(evidence: Evidence) -> None:
    """Ingest stored a new record: a verified one is its signer's newest run of the recipe
    unless a newer one is stored, so its column may move (a record that failed verification
    is in no column and costs no query). Only a counted column can change a badge; reported
    and simulated runs change the grid's cells and counts."""
    if evidence.verdict != Verdict.VERIFIED or evidence.withdrawn_at is not None:
        return
    name, signer = evidence.recipe_name, evidence.signer_id
    from evidence_app.releases.stored import profiles_refresh  # it reads this module's locks

    with transaction.atomic(savepoint=False):
        _lock(frozenset([name]))
        moved = stored_columns.columns_refresh(
            name, [signer], added=evidence, counted_record=is_counted(evidence)
        )
        if moved:
            _store(frozenset([name]), timezone.now())
        if _moves_a_release(evidence):
            profiles_refresh(frozenset([name]))


def evidence_withdrawn(evidence: Evidence) -> None:
    name = evidence.recipe_name
    _refreshed(
        frozenset([name]), lambda: stored_columns.columns_refresh(name, [evidence.signer_id])
    )


def signers_changed(signer_ids: Iterable[int]) -> None:
    """Signers started or stopped counting: refresh their columns of the recipes their runs
    are for."""
    ids = sorted(set(signer_ids))
    if not ids:
        return
    publication_changed()  # a signer's class is published too
    names = frozenset(
        Evidence.objects.filter(
            signer_id__in=ids,
            verdict=Verdict.VERIFIED,
            withdrawn_at__isnull=True,
            is_simulated=False,
        )
        .order_by()
        .values_list("recipe_name", flat=True)
        .distinct()
    )

    def refresh() -> bool:
        moved = [stored_columns.columns_refresh(name, ids) for name in sorted(names)]
        return any(moved)

    _refreshed(names, refresh)


def catalog_changed() -> None:
    """A new current catalog version: every badge's declared checks or staleness may move,
    and every release profile's plan (the recipe's digest) and declared checks. Which run
    each column selects does not (the catalog picks none), so the columns are only judged
    for staleness again, unless they were built under other settings."""
    publication_changed()  # and the published coordinates

    def refresh() -> bool:
        current = ConsensusRules.objects.filter(
            pk=ConsensusRules.SINGLETON, fingerprint=rules_fingerprint()
        ).exists()
        if current:
            stored_columns.columns_restale(None)
        else:
            stored_columns.columns_rebuild(None)
        return True

    _refreshed(None, refresh)


def backfill_if_empty() -> int:
    """Fill the table where it is empty but counted evidence exists (a database migrated from
    before it existed); nothing otherwise."""
    live = Evidence.objects.filter(verdict=Verdict.VERIFIED, withdrawn_at__isnull=True)
    columns_missing = not ConsensusName.objects.exists() and live.exists()
    badges_missing = (
        not RecipeConsensusState.objects.exists() and Evidence.objects.counted().exists()
    )
    if not (columns_missing or badges_missing):
        return 0
    return consensus_refresh()
