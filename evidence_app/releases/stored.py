"""Each release profile's status, stored and kept current where it changes (``ReleaseProfile``).

The page, the API, the feed and the badge read one row per claimed profile instead of
recomputing the rule (``status.profile_status``: the newest candidates' recorded identities
and check results, decoded and compared) on every request. What a status rests on, and who
refreshes it:

- the release itself: immutable once declared; ``release_declare`` stores its rows;
- the recipe's evidence: a new record that can move a status (``evidence_stored``: a counted
  one, or a simulated, demo or key-signed one the "not yet run" sentence counts), a
  withdrawal, a signer starting or stopping to count (allowlist, key revocation) refresh the
  rows of the recipe names involved, from ``consensus.stored``'s hooks, in the transaction
  that makes the change and under its locks (so two changes of one recipe cannot lose one
  refresh);
- the current catalog (the plan's digest, the declared checks): a new catalog version
  refreshes every row (``catalog_changed``);
- the settings (``AICR_SUPPORTED_RANGE``: which runs count; ``RELEASES_ACCEPT_KEY_SIGNED``)
  and the catalog a row was computed under: each row records them (``fingerprint``); a read
  that finds another recomputes those rows first, so no status outlives what it rests on.

Time alone moves nothing here (a qualification does not age: AICR's policy names changes,
not dates). The "Not claimed" rows are the current catalog's stored consensus rows
(``RecipeConsensusState``: one per recipe with counted evidence), not a scan of evidence.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import asdict

from django.db import transaction
from django.utils import timezone

from evidence_app.coverage.recorded import Difference
from evidence_app.models import Release, ReleaseProfile
from evidence_app.services.versions import supported_range
from recipes_app.models import Catalog, RecipeConsensusState

from .status import ProfileStatus, accepts_key_signed, computed_profiles

# What a row holds, versioned: a release that stores more bumps it, and the first read after
# the deploy recomputes every row written before.
STORED_FIELDS_VERSION = 1
_UPDATED = ["position", "status", "reason", "evidence", "differences", "examined"]


def fingerprint(catalog: Catalog | None) -> str:
    """The catalog and the settings a stored status rests on, as one string."""
    return (
        f"catalog={catalog.pk if catalog is not None else 'none'}"
        f";aicr-supported-range={supported_range().text}"
        f";key-signed={int(accepts_key_signed())};stored-fields={STORED_FIELDS_VERSION}"
    )


def _as_status(row: ReleaseProfile, tuple_: dict[str, str]) -> ProfileStatus:
    return ProfileStatus(
        row.recipe_name,
        row.status,
        row.reason,
        list(row.evidence),
        [Difference(**d) for d in row.differences],
        tuple_,
        row.examined,
    )


def release_store(
    release: Release, catalog: Catalog | None, names: Collection[str] | None = None
) -> list[ProfileStatus]:
    """Compute and store the statuses of ``release``'s profiles called ``names`` (None: all);
    returns them, in the release's order. The caller holds the locks where it needs them."""
    statuses = computed_profiles(release, catalog, names)
    positions = {str(e.get("recipe")): i for i, e in enumerate(release.profiles)}
    now, stamp = timezone.now(), fingerprint(catalog)
    ReleaseProfile.objects.bulk_create(
        [
            ReleaseProfile(
                release=release,
                position=positions[s.recipe],
                recipe_name=s.recipe,
                status=s.status,
                reason=s.reason,
                evidence=s.evidence,
                differences=[asdict(d) for d in s.differences],
                examined=s.examined,
                fingerprint=stamp,
                refreshed_at=now,
            )
            for s in statuses
        ],
        update_conflicts=True,
        unique_fields=["release", "recipe_name"],
        update_fields=[*_UPDATED, "fingerprint", "refreshed_at"],
    )
    return statuses


def stored_profiles(release: Release, catalog: Catalog | None) -> list[ProfileStatus]:
    """The release's profile statuses as stored (one query); those missing, or computed under
    another catalog or other settings, are recomputed and stored first."""
    stamp = fingerprint(catalog)
    rows = {r.recipe_name: r for r in ReleaseProfile.objects.filter(release=release)}
    tuples = {str(e.get("recipe")): dict(e.get("tuple") or {}) for e in release.profiles}
    stale = {n for n in tuples if n not in rows or rows[n].fingerprint != stamp}
    fresh: dict[str, ProfileStatus] = {}
    if stale:
        from evidence_app.consensus.stored import lock_names  # it imports this module

        with transaction.atomic():
            lock_names(stale)
            fresh = {s.recipe: s for s in release_store(release, catalog, stale)}
    return [fresh[n] if n in fresh else _as_status(rows[n], tuples[n]) for n in tuples]


def profiles_refresh(names: Iterable[str] | None) -> int:
    """Recompute the stored rows of every release profile called one of ``names`` (None:
    all); returns how many. One query when no release claims any of them. Called by
    ``consensus.stored``'s hooks, under their locks."""
    rows = ReleaseProfile.objects.all()
    if names is not None:
        wanted = sorted(set(names))
        if not wanted:
            return 0
        rows = rows.filter(recipe_name__in=wanted)
    claims: dict[int, set[str]] = {}
    for release_id, name in rows.order_by().values_list("release_id", "recipe_name"):
        claims.setdefault(release_id, set()).add(name)
    if not claims:
        return 0
    catalog = Catalog.objects.current()
    releases = Release.objects.in_bulk(list(claims))
    for release_id, claimed in sorted(claims.items()):
        release_store(releases[release_id], catalog, claimed)
    return sum(len(c) for c in claims.values())


def unclaimed(catalog: Catalog, claimed: Collection[str]) -> list[str]:
    """The current recipes with counted evidence the release does not claim, by name: the
    stored consensus rows (one per recipe row with counted evidence), one indexed query,
    after the one that finds them current (``consensus_refresh_expired``: a settings change
    moves which runs count)."""
    from evidence_app.consensus.stored import consensus_refresh_expired

    consensus_refresh_expired(catalog=catalog)
    return list(
        RecipeConsensusState.objects.filter(recipe__catalog=catalog)
        .exclude(recipe__name__in=list(claimed))
        .order_by("recipe__name")
        .values_list("recipe__name", flat=True)
        .distinct()
    )
