"""Why a piece of evidence is stale, each reason with a sentence a person can read.

Reasons (codes, in display order):

``recipe-changed``              the subject digest is not the current catalog's digest for that
                                recipe name (or the recipe left the catalog);
``older-than-30-days``          ``attestedAt`` is more than ``EVIDENCE_STALE_AFTER_DAYS`` ago;
``aicr-outdated``               made with an older AICR version than the newest seen for the recipe
                                among counted evidence (verified, counted signer, not simulated,
                                not withdrawn), or than the current catalog's (Go semver
                                order, as AICR sorts versions);
``validator-catalog-outdated``  ``validatorCatalogVersion`` is older than the current catalog's
                                ``validators/catalog.yaml`` ``metadata.version``;
``signer-not-allowlisted``      the signer counted before (allowlisted, or a registered key) and
                                does not now (from ``SignerClassChange``);
``withdrawn``                   withdrawn by its contributor or a maintainer.

``staleness_reasons`` judges one record from given facts; ``staleness_bulk`` gathers those facts
for a list in a fixed number of queries; ``stale_filter`` asks the same question in SQL (for
``?stale=true|false`` on paginated lists), using the digits-only version keys.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Exists, F, Max, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from evidence_app.corroborate.versions import compare
from evidence_app.models import Evidence, SignerClassChange
from evidence_app.services.versions import INVALID_KEY, version_key
from recipes_app.models import Catalog, Recipe

RECIPE_CHANGED = "recipe-changed"
OLDER_THAN_30_DAYS = "older-than-30-days"
AICR_OUTDATED = "aicr-outdated"
VALIDATOR_CATALOG_OUTDATED = "validator-catalog-outdated"
SIGNER_NOT_ALLOWLISTED = "signer-not-allowlisted"
WITHDRAWN = "withdrawn"
CODES = (
    RECIPE_CHANGED,
    OLDER_THAN_30_DAYS,
    AICR_OUTDATED,
    VALIDATOR_CATALOG_OUTDATED,
    SIGNER_NOT_ALLOWLISTED,
    WITHDRAWN,
)


@dataclass(frozen=True)
class StaleReason:
    code: str
    detail: str

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "detail": self.detail}


@dataclass(frozen=True)
class AllowlistState:
    """Signers that counted before (allowlisted or a registered key) and do not now."""

    delisted_signer_ids: frozenset[int] = frozenset()

    def delisted(self, signer_id: int | None) -> bool:
        return signer_id in self.delisted_signer_ids


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
    validator_catalog_version: str = "",
) -> list[StaleReason]:
    """The reasons ``evidence`` is stale (empty: fresh). ``current_recipe_digest``: the current
    catalog's digest for ``evidence.recipe_name`` (None: no such recipe any more);
    ``newest_aicr_version``: the newest AICR version for that recipe (evidence or catalog);
    ``validator_catalog_version``: the current catalog's (empty: unknown)."""
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
    if newest_aicr_version and compare(evidence.aicr_version, newest_aicr_version) < 0:
        reasons.append(
            StaleReason(
                AICR_OUTDATED,
                f"Made with AICR {evidence.aicr_version or '(unknown)'}; AICR "
                f"{newest_aicr_version} is newer for this recipe.",
            )
        )
    if (
        validator_catalog_version
        and compare(_v(evidence.validator_catalog_version), _v(validator_catalog_version)) < 0
    ):
        reasons.append(
            StaleReason(
                VALIDATOR_CATALOG_OUTDATED,
                f"Validator catalog {evidence.validator_catalog_version or '(unknown)'} is older "
                f"than the current catalog's {validator_catalog_version}.",
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


def _v(version: str) -> str:
    text = (version or "").strip()
    return text if not text or text.startswith("v") else "v" + text


# --- facts for a list ------------------------------------------------------------------------


def validator_catalog_version(catalog: Catalog | None) -> str:
    """``metadata.version`` of the catalog's ``validators/catalog.yaml`` ('' when absent),
    recorded by the catalog importer."""
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
    current_digests: dict[str, str] = field(default_factory=dict)
    newest_aicr: dict[str, str] = field(default_factory=dict)
    validator_catalog_version: str = ""
    allowlist_state: AllowlistState = field(default_factory=AllowlistState)

    def reasons(self, evidence: Evidence) -> list[StaleReason]:
        return staleness_reasons(
            evidence,
            current_recipe_digest=self.current_digests.get(evidence.recipe_name),
            now=self.now,
            newest_aicr_version=self.newest_aicr.get(evidence.recipe_name, ""),
            allowlist_state=self.allowlist_state,
            validator_catalog_version=self.validator_catalog_version,
        )


def delisted_signers(signer_ids: Iterable[int]) -> frozenset[int]:
    ids = set(signer_ids)
    if not ids:
        return frozenset()
    return frozenset(
        SignerClassChange.objects.filter(
            signer_id__in=ids, from_counted=True, signer__counted=False
        ).values_list("signer_id", flat=True)
    )


def staleness_context(
    evidence: Sequence[Evidence], *, now: datetime | None = None
) -> StalenessContext:
    """The facts ``staleness_reasons`` needs for ``evidence``, in at most five queries."""
    context = StalenessContext(now=now or timezone.now())
    names = {e.recipe_name for e in evidence}
    if not names:
        return context
    catalog = Catalog.objects.current()
    if catalog is not None:
        context.current_digests = dict(
            Recipe.objects.filter(catalog=catalog, name__in=names).values_list("name", "digest")
        )
    by_recipe: dict[str, set[str]] = {}
    for name, version in (
        # Only evidence that counts sets the bar: an unallowlisted signer (or a simulated run)
        # claiming AICR v99 must not make everyone else's evidence outdated.
        Evidence.objects.counted()
        .filter(recipe_name__in=names)
        .order_by()
        .values_list("recipe_name", "aicr_version")
        .distinct()
    ):
        by_recipe.setdefault(name, set()).add(version)
    catalog_version = catalog.aicr_version if catalog is not None else ""
    for name in names:
        candidates = by_recipe.get(name, set())
        if catalog_version:
            candidates = candidates | {catalog_version}
        context.newest_aicr[name] = _newest(sorted(candidates))
    context.validator_catalog_version = validator_catalog_version(catalog)
    context.allowlist_state = AllowlistState(delisted_signers(e.signer_id for e in evidence))
    return context


def staleness_bulk(
    evidence: Sequence[Evidence], *, now: datetime | None = None
) -> dict[int, list[StaleReason]]:
    """``{evidence id: reasons}`` for a list, without a query per row."""
    context = staleness_context(evidence, now=now)
    return {e.pk: context.reasons(e) for e in evidence}


# --- the same question in SQL ----------------------------------------------------------------


def stale_q(*, now: datetime | None = None) -> tuple[dict[str, object], Q]:
    """``(annotations, Q)``: ``qs.annotate(**annotations).filter(Q)`` keeps the stale rows."""
    now = now or timezone.now()
    catalog = Catalog.objects.current()
    newest = (
        Evidence.objects.counted()
        .filter(recipe_name=OuterRef("recipe_name"))
        .order_by()
        .values("recipe_name")
        .annotate(newest=Max("aicr_version_key"))
        .values("newest")[:1]
    )
    newest_expr: object = Coalesce(Subquery(newest), Value(INVALID_KEY))
    catalog_key = version_key(catalog.aicr_version) if catalog is not None else INVALID_KEY
    if catalog_key != INVALID_KEY:
        newest_expr = Greatest(newest_expr, Value(catalog_key))
    annotations: dict[str, object] = {
        "_stale_newest_aicr": newest_expr,
        "_stale_recipe_current": Exists(
            Recipe.objects.filter(
                catalog=catalog, name=OuterRef("recipe_name"), digest=OuterRef("subject_digest")
            )
        )
        if catalog is not None
        else Value(False),
        "_stale_delisted": Exists(
            SignerClassChange.objects.filter(signer=OuterRef("signer"), from_counted=True)
        ),
    }
    condition = (
        Q(withdrawn_at__isnull=False)
        | Q(_stale_recipe_current=False)
        | Q(attested_at__lt=now - timedelta(days=stale_after_days()))
        | Q(aicr_version_key__lt=F("_stale_newest_aicr"))
        | Q(_stale_delisted=True, signer__counted=False)
    )
    validator = validator_catalog_version(catalog)
    if validator:
        validator_key = version_key(validator, assume_v=True)
        if validator_key != INVALID_KEY:
            condition |= Q(validator_catalog_version_key__lt=validator_key)
    return annotations, condition


def stale_filter(
    queryset: QuerySet[Evidence], *, stale: bool, now: datetime | None = None
) -> QuerySet[Evidence]:
    annotations, condition = stale_q(now=now)
    queryset = queryset.annotate(**annotations)
    return queryset.filter(condition) if stale else queryset.exclude(condition)
