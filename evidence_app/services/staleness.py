"""Why a piece of evidence is stale, each reason with a sentence a person can read.

Reasons (codes, in display order):

``recipe-changed``              the subject digest is not the current catalog's digest for that
                                recipe name (or the recipe left the catalog): its V3 digest
                                (``Recipe.digest_v3``) for a ``recipe-evidence/v3`` statement,
                                its legacy digest (``Recipe.digest``) otherwise;
``older-than-30-days``          ``attestedAt`` is more than ``EVIDENCE_STALE_AFTER_DAYS`` ago;
``aicr-outdated``               made with an AICR *release* older than the newest release known
                                for the recipe: among counted evidence (verified, counted signer,
                                not simulated, not withdrawn, in the supported range), or the
                                current catalog's when that is a supported release (Go semver
                                order, as AICR sorts versions). Evidence made with a non-release
                                (``dev``, empty) is never "outdated": it cannot be placed on the
                                release line, and its tree is judged by content instead (a
                                ``dev`` run on an older tree is ``recipe-changed`` already). A
                                release is never older than ``dev``;
``aicr-unsupported``            its AICR version is outside ``AICR_SUPPORTED_RANGE`` (a
                                non-release is outside every non-empty range): not counted;
``validator-catalog-outdated``  the validator check set of the catalog its recipe row belongs to
                                (``Catalog.validator_checks_digest``) is not the current
                                catalog's. Content, not ``validatorCatalogVersion``: AICR never
                                bumped that "1.0.0" when it added checks (AICR-V1.md §5);
``signer-not-allowlisted``      the signer counted before (allowlisted, or a registered key) and
                                does not now (from ``SignerClassChange``);
``withdrawn``                   withdrawn by its contributor or a maintainer.

Relative to what a person compares the record with (a release's declared identities, or the
snapshot of their cluster), not to the record alone, so outside ``CODES`` (the stored badges,
``?stale=`` and the SQL filter judge records alone):

``identity-changed``            a recorded identity differs from the release's (or the
                                snapshot's): "<identity> changed from <recorded> to <expected>"
                                (``identity_reasons``; AICR's policy: a qualification covers
                                exact identities and stops applying when one changes).

``staleness_reasons`` judges one record from given facts; ``staleness_bulk`` gathers those facts
for a list in a fixed number of queries; ``stale_filter`` asks the same question in SQL (for
``?stale=true|false`` on paginated lists), using the digits-only version keys.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Exists, F, Max, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.expressions import RawSQL
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from evidence_app.corroborate.versions import compare
from evidence_app.coverage.recorded import DIFFERS, Difference
from evidence_app.models import Evidence, SignerClassChange, supported_range_q
from evidence_app.services.versions import (
    INVALID_KEY,
    SupportedRange,
    is_release,
    supported_range,
    version_key,
)
from evidence_app.verification.digests import PREDICATE_V3, DigestScheme, scheme_for
from recipes_app.models import Catalog, Recipe

RECIPE_CHANGED = "recipe-changed"
OLDER_THAN_30_DAYS = "older-than-30-days"
AICR_OUTDATED = "aicr-outdated"
AICR_UNSUPPORTED = "aicr-unsupported"
VALIDATOR_CATALOG_OUTDATED = "validator-catalog-outdated"
SIGNER_NOT_ALLOWLISTED = "signer-not-allowlisted"
WITHDRAWN = "withdrawn"
CODES = (
    RECIPE_CHANGED,
    OLDER_THAN_30_DAYS,
    AICR_OUTDATED,
    AICR_UNSUPPORTED,
    VALIDATOR_CATALOG_OUTDATED,
    SIGNER_NOT_ALLOWLISTED,
    WITHDRAWN,
)

IDENTITY_CHANGED = "identity-changed"
RELATIVE_CODES = (IDENTITY_CHANGED,)


@dataclass(frozen=True)
class StaleReason:
    code: str
    detail: str

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "detail": self.detail}

    @property
    def badge(self) -> str:
        """A label's text: ``stale: <code>``, or the range's own words for aicr-unsupported."""
        if self.code == AICR_UNSUPPORTED:
            return f"outside the supported AICR range ({supported_range().text})"
        return f"stale: {self.code}"


@dataclass(frozen=True)
class AllowlistState:
    """Signers that counted before (allowlisted or a registered key) and do not now."""

    delisted_signer_ids: frozenset[int] = frozenset()

    def delisted(self, signer_id: int | None) -> bool:
        return signer_id in self.delisted_signer_ids


@dataclass(frozen=True)
class CheckSet:
    """A validator catalog's check set (``Catalog.validator_checks``) and its digest."""

    digest: str
    checks: tuple[str, ...] = ()


@dataclass(frozen=True)
class RecipeDigests:
    """A current recipe's digests: legacy (``recipe-evidence/v1``, ``/v2``) and V3."""

    legacy: str
    v3: str = ""


def _current_digest_for(predicate_type: str, digests: RecipeDigests | None) -> str | None:
    """The current recipe's digest a statement of ``predicate_type`` must name, by the one
    dispatch rule (``verification.digests.scheme_for``: V3 for exactly the v3 URI, legacy
    otherwise). ``stale_q`` asks the same in SQL."""
    if digests is None:
        return None
    return digests.v3 if scheme_for(predicate_type) is DigestScheme.V3 else digests.legacy


def stale_after_days() -> int:
    return int(getattr(settings, "EVIDENCE_STALE_AFTER_DAYS", 30))


def _short(digest: str) -> str:
    return f"sha256:{digest[:12]}…"


def staleness_reasons(
    evidence: Evidence,
    *,
    current_recipe_digest: str | None,
    now: datetime,
    newest_aicr_version: str,
    allowlist_state: AllowlistState,
    validator_checks: CheckSet | None = None,
    current_validator_checks: CheckSet | None = None,
    supported: SupportedRange | None = None,
) -> list[StaleReason]:
    """The reasons ``evidence`` is stale (empty: fresh). ``current_recipe_digest``: the current
    catalog's digest for ``evidence.recipe_name`` in the scheme of its predicate type (None: no
    such recipe any more); ``newest_aicr_version``: the newest release known for that recipe
    (evidence or catalog); ``validator_checks``: the check set of the catalog of the
    evidence's recipe row, ``current_validator_checks`` the current catalog's (None or an
    empty digest: unknown); ``supported``: the supported AICR range (None: the setting's)."""
    supported = supported if supported is not None else supported_range()
    reasons: list[StaleReason] = []
    if current_recipe_digest is None:
        reasons.append(
            StaleReason(
                RECIPE_CHANGED,
                f"The recipe changed: {evidence.recipe_name} is no longer in the current catalog.",
            )
        )
    elif current_recipe_digest != evidence.subject_digest:
        reasons.append(
            StaleReason(
                RECIPE_CHANGED,
                f"The recipe changed: this evidence attests {_short(evidence.subject_digest)}, "
                f"the current catalog's {evidence.recipe_name} is "
                f"{_short(current_recipe_digest)}.",
            )
        )
    days = stale_after_days()
    age = now - evidence.attested_at
    if age > timedelta(days=days):
        reasons.append(
            StaleReason(
                OLDER_THAN_30_DAYS,
                f"Attested {age.days} days ago ({evidence.attested_at:%Y-%m-%d}); evidence "
                f"older than {days} days is stale.",
            )
        )
    # Releases against releases only: a non-release (dev) cannot be placed on the release line
    # and is judged by its content (recipe-changed, validator-catalog-outdated) instead.
    if (
        newest_aicr_version
        and is_release(evidence.aicr_version)
        and compare(evidence.aicr_version, newest_aicr_version) < 0
    ):
        reasons.append(
            StaleReason(
                AICR_OUTDATED,
                f"Made with AICR {evidence.aicr_version}; AICR {newest_aicr_version} is newer "
                "for this recipe.",
            )
        )
    if not supported.contains(evidence.aicr_version):
        reasons.append(StaleReason(AICR_UNSUPPORTED, unsupported_sentence(evidence.aicr_version)))
    if (
        validator_checks is not None
        and current_validator_checks is not None
        and validator_checks.digest
        and current_validator_checks.digest
        and validator_checks.digest != current_validator_checks.digest
    ):
        reasons.append(
            StaleReason(
                VALIDATOR_CATALOG_OUTDATED,
                _check_set_change(validator_checks, current_validator_checks),
            )
        )
    if allowlist_state.delisted(evidence.signer_id):
        label = evidence.signer.label if "signer" in evidence._state.fields_cache else "signer"
        reasons.append(
            StaleReason(
                SIGNER_NOT_ALLOWLISTED,
                f"The signer {label} counted before (allowlisted or a registered key) and is "
                "no longer allowlisted: its evidence does not count.",
            )
        )
    if evidence.withdrawn_at is not None:
        reasons.append(
            StaleReason(
                WITHDRAWN,
                f"Withdrawn on {evidence.withdrawn_at:%Y-%m-%d}: {evidence.withdrawal_reason}",
            )
        )
    return reasons


def identity_reasons(found: Iterable[Difference]) -> list[StaleReason]:
    """One ``identity-changed`` reason per identity that differs (redacted and not-recorded
    ones are not changes: nothing says they changed, only that they cannot be compared)."""
    return [
        StaleReason(IDENTITY_CHANGED, f"{d.label} changed from {d.recorded} to {d.expected}")
        for d in found
        if d.state == DIFFERS
    ]


def unsupported_sentence(version: str, *, what: str = "Made with") -> str:
    """Why ``version`` is outside the supported AICR range, in a sentence."""
    shown = version.strip() or "(unknown)"
    why = "" if is_release(version) else " (not a release: no range can place it)"
    return (
        f"{what} AICR {shown}, outside the supported AICR range ({supported_range().text}){why}; "
        "evidence outside it does not count."
    )


def _check_set_change(old: CheckSet, new: CheckSet) -> str:
    added = sorted(set(new.checks) - set(old.checks))
    removed = sorted(set(old.checks) - set(new.checks))
    parts = []
    if added:
        parts.append(f"adds {', '.join(added)}")
    if removed:
        parts.append(f"removes {', '.join(removed)}")
    change = " and ".join(parts) if parts else "has another check set"
    return f"The validator catalog changed: the current one {change}."


# --- facts for a list ------------------------------------------------------------------------


def validator_catalog_version(catalog: Catalog | None) -> str:
    """``metadata.version`` of the catalog's ``validators/catalog.yaml`` ('' when absent),
    recorded by the catalog importer (shown, never compared: see validator-catalog-outdated)."""
    return catalog.validator_catalog_version if catalog is not None else ""


def _newest(versions: Iterable[str]) -> str:
    newest = ""
    for version in versions:
        if not newest or compare(version, newest) > 0:
            newest = version
    return newest


@dataclass
class StalenessContext:
    now: datetime
    current_digests: dict[str, RecipeDigests] = field(default_factory=dict)
    newest_aicr: dict[str, str] = field(default_factory=dict)
    current_checks: CheckSet | None = None
    check_sets: dict[int, CheckSet] = field(default_factory=dict)  # catalog id → its check set
    recipe_catalogs: dict[int, int] = field(default_factory=dict)  # recipe id → catalog id
    allowlist_state: AllowlistState = field(default_factory=AllowlistState)

    def reasons(self, evidence: Evidence, *, catalog_id: int | None = None) -> list[StaleReason]:
        """``evidence``'s reasons; ``catalog_id``: its recipe row's catalog (None: looked up
        from ``recipe_catalogs``)."""
        if catalog_id is None:
            catalog_id = self.recipe_catalogs.get(evidence.recipe_id)
        return staleness_reasons(
            evidence,
            current_recipe_digest=_current_digest_for(
                evidence.predicate_type, self.current_digests.get(evidence.recipe_name)
            ),
            now=self.now,
            newest_aicr_version=self.newest_aicr.get(evidence.recipe_name, ""),
            allowlist_state=self.allowlist_state,
            validator_checks=self.check_sets.get(catalog_id) if catalog_id is not None else None,
            current_validator_checks=self.current_checks,
        )

    def load_check_sets(self, catalog_ids: Iterable[int]) -> None:
        """The check sets of the catalogs not loaded yet (one query when any is new)."""
        new = set(catalog_ids) - set(self.check_sets)
        if new:
            self.check_sets.update(check_sets(Catalog.objects.filter(pk__in=sorted(new))))


def check_sets(catalogs: QuerySet[Catalog]) -> dict[int, CheckSet]:
    return {
        pk: CheckSet(digest=digest, checks=tuple(checks or ()))
        for pk, digest, checks in catalogs.values_list(
            "pk", "validator_checks_digest", "validator_checks"
        )
    }


def delisted_signers(signer_ids: Iterable[int] | None) -> frozenset[int]:
    """Of ``signer_ids`` (None: every signer), those that counted once and count no more."""
    changes = SignerClassChange.objects.filter(from_counted=True, signer__counted=False)
    if signer_ids is not None:
        ids = set(signer_ids)
        if not ids:
            return frozenset()
        changes = changes.filter(signer_id__in=ids)
    return frozenset(changes.values_list("signer_id", flat=True))


def _catalog_bar(catalog: Catalog | None, supported: SupportedRange) -> str:
    """The current catalog's AICR version when it sets the aicr-outdated bar: a release in the
    supported range ('' otherwise: ``dev`` sets no bar)."""
    version = catalog.aicr_version if catalog is not None else ""
    return version if is_release(version) and supported.contains(version) else ""


def _load_recipe_facts(
    context: StalenessContext,
    evidence: Sequence[Evidence],
    names: set[str],
    catalog: Catalog | None,
) -> None:
    """In one query: the current catalog's digests of ``names``, and the catalog (with its
    validator check set) of each evidence's recipe row."""
    recipe_ids = {e.recipe_id for e in evidence if e.recipe_id}  # export probes have none
    wanted = Q(pk__in=sorted(recipe_ids))
    if catalog is not None:
        wanted |= Q(catalog=catalog, name__in=sorted(names))
    elif not recipe_ids:
        return
    for pk, name, catalog_id, digest, digest_v3, checks_digest, checks in Recipe.objects.filter(
        wanted
    ).values_list(
        "pk",
        "name",
        "catalog_id",
        "digest",
        "digest_v3",
        "catalog__validator_checks_digest",
        "catalog__validator_checks",
    ):
        if catalog is not None and catalog_id == catalog.pk and name in names:
            context.current_digests[name] = RecipeDigests(legacy=digest, v3=digest_v3)
        if pk in recipe_ids:
            context.recipe_catalogs[pk] = catalog_id
            context.check_sets[catalog_id] = CheckSet(
                digest=checks_digest, checks=tuple(checks or ())
            )


def newest_counted_releases(names: Iterable[str]) -> dict[str, str]:
    """``{recipe name: its newest AICR release among counted evidence}`` (names without one
    left out), in one query. Only evidence that counts sets the bar: an unallowlisted signer
    (or a simulated run) claiming AICR v99 must not make everyone else's evidence outdated.

    On PostgreSQL, one ``ORDER BY aicr_version_key DESC LIMIT 1`` probe per name (a lateral
    join over the names): each walks the partial ``evidence_live_newest_aicr_idx`` backwards
    and stops at the first counted release, instead of reading every live row of the names
    for a ``DISTINCT`` (123-685 ms a list at 1M). The key orders releases as Go semver does
    (``version_key``); one key is one precedence, so which spelling of it comes back cannot
    change a judgment. SQLite has no lateral join: it keeps the ``DISTINCT``, small at the
    sizes SQLite serves."""
    wanted = sorted(set(names))
    if not wanted:
        return {}
    releases = Evidence.objects.counted().exclude(aicr_version_key__in=_NO_RELEASE_KEYS)
    by_recipe: dict[str, set[str]] = {}
    rows: Iterable[tuple[str, str]]  # (name, release): its newest one, or all (SQLite)
    if connection.vendor == "postgresql":
        # One plan for every name (a UNION of per-name probes spent longer planning than the
        # DISTINCT ran): each name of the array drives one ``LIMIT 1`` probe.
        probe = (
            releases.filter(recipe_name=RawSQL('"wanted"."name"', ()))
            .order_by("-aicr_version_key")
            .values_list("aicr_version")[:1]
        )
        probe_sql, probe_params = probe.query.sql_with_params()
        # The probe is Django's own compiled SQL, its values in probe_params.
        names_sql = 'unnest(%s::text[]) AS "wanted"("name")'
        sql = f'SELECT "wanted"."name", "newest"."aicr_version" FROM {names_sql} CROSS JOIN LATERAL ({probe_sql}) AS "newest"'  # noqa: E501, S608
        with connection.cursor() as cursor:
            cursor.execute(sql, [wanted, *probe_params])
            rows = cursor.fetchall()
    else:
        rows = (
            releases.filter(recipe_name__in=wanted)
            .order_by()
            .values_list("recipe_name", "aicr_version")
            .distinct()
        )
    for name, version in rows:
        if is_release(version):
            by_recipe.setdefault(name, set()).add(version)
    return {name: _newest(sorted(versions)) for name, versions in by_recipe.items()}


def newest_aicr_bars(names: Iterable[str], catalog: Catalog | None) -> dict[str, str]:
    """Per name, the release its runs are "aicr-outdated" against: the newest of its counted
    releases and the current catalog's (``_catalog_bar``); one query."""
    wanted = sorted(set(names))
    newest = newest_counted_releases(wanted)
    catalog_version = _catalog_bar(catalog, supported_range())
    bars: dict[str, str] = {}
    for name in wanted:
        candidates = {newest[name]} if name in newest else set()
        if catalog_version:
            candidates = candidates | {catalog_version}
        bars[name] = _newest(sorted(candidates))
    return bars


def bar_with(bar: str, evidence: Evidence) -> str:
    """A name's "aicr-outdated" bar once ``evidence``, a new counted record of it, is stored,
    from its bar before (``newest_aicr_bars`` without its query): a counted record can only
    add its own release to the candidates. The newest of the two is taken as
    ``newest_aicr_bars`` takes it (``_newest`` over the sorted set), so of two spellings of one
    release the same one wins."""
    version = evidence.aicr_version
    if not is_release(version):
        return bar
    return _newest(sorted({bar, version} - {""}))


def staleness_context(
    evidence: Sequence[Evidence],
    *,
    now: datetime | None = None,
    bars: Mapping[str, str] | None = None,
) -> StalenessContext:
    """The facts ``staleness_reasons`` needs for ``evidence``, in at most four queries (three
    when the caller knows the names' ``bars``: ``newest_aicr_bars`` of every name)."""
    context = StalenessContext(now=now or timezone.now())
    names = {e.recipe_name for e in evidence}
    if not names:
        return context
    catalog = Catalog.objects.current()
    if catalog is not None:
        context.current_checks = CheckSet(
            digest=catalog.validator_checks_digest, checks=tuple(catalog.validator_checks or ())
        )
    _load_recipe_facts(context, evidence, names, catalog)
    if bars is not None and names <= bars.keys():
        context.newest_aicr.update({name: bars[name] for name in names})
    else:
        context.newest_aicr.update(newest_aicr_bars(names, catalog))
    context.allowlist_state = AllowlistState(delisted_signers(e.signer_id for e in evidence))
    return context


def staleness_bulk(
    evidence: Sequence[Evidence], *, now: datetime | None = None
) -> dict[int, list[StaleReason]]:
    """``{evidence id: reasons}`` for a list, without a query per row."""
    context = staleness_context(evidence, now=now)
    return {e.pk: context.reasons(e) for e in evidence}


# --- the same question in SQL ----------------------------------------------------------------

# Version keys no release has: a non-release (``dev``, a label) and a row without a key.
_NO_RELEASE_KEYS = ("", INVALID_KEY)


def stale_q(*, now: datetime | None = None) -> tuple[dict[str, object], Q]:
    """``(annotations, Q)``: ``qs.annotate(**annotations).filter(Q)`` keeps the stale rows."""
    now = now or timezone.now()
    catalog = Catalog.objects.current()
    supported = supported_range()
    newest = (
        Evidence.objects.counted()
        .filter(recipe_name=OuterRef("recipe_name"))
        .order_by()
        .values("recipe_name")
        .annotate(newest=Max("aicr_version_key"))
        .values("newest")[:1]
    )
    newest_expr: object = Coalesce(Subquery(newest), Value(INVALID_KEY))
    catalog_key = version_key(_catalog_bar(catalog, supported))
    if catalog_key != INVALID_KEY:
        newest_expr = Greatest(newest_expr, Value(catalog_key))
    current = Recipe.objects.filter(catalog=catalog, name=OuterRef("recipe_name"))
    annotations: dict[str, object] = {
        "_stale_newest_aicr": newest_expr,
        # ``_current_digest_for`` in SQL: the V3 digest for a v3 statement, else the legacy one.
        "_stale_recipe_current": Exists(current.filter(digest=OuterRef("subject_digest")))
        if catalog is not None
        else Value(False),
        "_stale_recipe_current_v3": Exists(current.filter(digest_v3=OuterRef("subject_digest")))
        if catalog is not None
        else Value(False),
        "_stale_delisted": Exists(
            SignerClassChange.objects.filter(signer=OuterRef("signer"), from_counted=True)
        ),
    }
    v3 = Q(predicate_type=PREDICATE_V3)  # scheme_for in SQL: exactly the v3 URI
    condition = (
        Q(withdrawn_at__isnull=False)
        | (~v3 & Q(_stale_recipe_current=False))
        | (v3 & Q(_stale_recipe_current_v3=False))
        | Q(attested_at__lt=now - timedelta(days=stale_after_days()))
        | (
            Q(aicr_version_key__lt=F("_stale_newest_aicr"))
            & ~Q(aicr_version_key__in=_NO_RELEASE_KEYS)
        )
        | Q(_stale_delisted=True, signer__counted=False)
    )
    if supported.enabled:
        condition |= ~supported_range_q("aicr_version_key")
    current_checks = catalog.validator_checks_digest if catalog is not None else ""
    if current_checks:
        condition |= ~Q(recipe__catalog__validator_checks_digest=current_checks) & ~Q(
            recipe__catalog__validator_checks_digest=""
        )
    return annotations, condition


def stale_filter(
    queryset: QuerySet[Evidence], *, stale: bool, now: datetime | None = None
) -> QuerySet[Evidence]:
    annotations, condition = stale_q(now=now)
    queryset = queryset.annotate(**annotations)
    return queryset.filter(condition) if stale else queryset.exclude(condition)
