"""This site's consensus in AICR's own dashboard format: ``index.json`` and
``series/<recipe>.json`` (schema ``aicr-corroboration/v1``), written by the port of AICR's
generator (``corroborate.build_from_runs``, byte-identical to the Go tool on its fixtures).

The runs are the stored evidence that is verified, not withdrawn and not simulated. A signer
this site counts is ``allowlisted`` (AICR's weight 1), any other verified signer is reported
with weight 0, exactly as AICR's generator treats an unlisted signer; the class is this site's
(``registered-key`` included, a class AICR itself does not have). Key-signed runs carry the key
as their identity (issuer ``key``, identity ``sha256:<fingerprint>``) because AICR's model
needs both to tell signers apart.

The output is cached under ``evidence_version`` (two aggregate queries), so it is rebuilt once
after any upload, withdrawal or reclassification, and served from the cache otherwise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.core.cache import cache
from django.db.models import Count, Max

from evidence_app.consensus.rules import check_statuses
from evidence_app.corroborate import (
    Criteria,
    Run,
    RunMeta,
    Signer,
    SkipRun,
    build_from_runs,
    coordinate_for,
    make_run,
    marshal,
    safe_recipe_slug,
)
from evidence_app.models import Evidence, SignerClassChange, Verdict

CACHE_PREFIX = "evidence:aicr-dashboard:v1"
CACHE_TIMEOUT = 24 * 60 * 60
KEY_ISSUER = "key"


@dataclass(frozen=True)
class Publication:
    """The generator's files: ``index.json`` and recipe name → series bytes."""

    index: bytes
    series: dict[str, bytes]
    runs: int
    warnings: tuple[str, ...]


def _iso(evidence: Evidence) -> str:
    return evidence.attested_at.isoformat().replace("+00:00", "Z")


def dashboard_runs(warnings: list[str]) -> list[Run]:
    """Every publishable evidence row as one of AICR's admitted runs."""
    rows = (
        Evidence.objects.filter(
            verdict=Verdict.VERIFIED, withdrawn_at__isnull=True, is_simulated=False
        )
        .select_related("signer", "signer__key", "recipe")
        .only(
            "pk",
            "sha256",
            "recipe_name",
            "attested_at",
            "aicr_version",
            "k8s_version",
            "rekor_log_index",
            "check_results",
            "signer__identity",
            "signer__issuer",
            "signer__source_id",
            "signer__signer_class",
            "signer__counted",
            "signer__key__fingerprint",
            "recipe__service",
            "recipe__accelerator",
            "recipe__os",
            "recipe__intent",
            "recipe__platform",
        )
        .order_by("pk")
    )
    runs = []
    for evidence in rows.iterator(chunk_size=2000):
        recipe, signer = evidence.recipe, evidence.signer
        try:
            coordinate = coordinate_for(
                Criteria(
                    recipe.service, recipe.accelerator, recipe.os, recipe.intent, recipe.platform
                )
            )
        except ValueError as exc:
            warnings.append(f"evidence {evidence.pk}: no dashboard coordinate ({exc})")
            continue
        if signer.key is not None:  # selected with the signer
            issuer, identity = KEY_ISSUER, f"sha256:{signer.key.fingerprint}"
        else:
            issuer, identity = signer.issuer, signer.identity
        meta = RunMeta(
            coordinate=coordinate,
            recipe=evidence.recipe_name,
            signer=Signer(
                id_hash=signer.source_id,
                identity=identity,
                issuer=issuer,
                class_=signer.signer_class,
                allowlisted=signer.counted,
            ),
            run_id=evidence.sha256[:16],
            attested_at=_iso(evidence),
            aicr_version=evidence.aicr_version,
            k8s_version=evidence.k8s_version,
            evidence_ref=f"/api/v1/evidence/{evidence.pk}/bundle",
            bundle_digest=f"sha256:{evidence.sha256}",
            rekor_log_index=evidence.rekor_log_index,
        )
        statuses = check_statuses(evidence.check_results)
        try:
            runs.append(make_run(meta, statuses, None, warnings))
        except SkipRun:
            continue
    return runs


def publication_build() -> Publication:
    warnings: list[str] = []
    runs = dashboard_runs(warnings)
    result = build_from_runs(runs, warnings)
    series = {name: marshal(body) for name, body in result.series.items() if safe_recipe_slug(name)}
    return Publication(
        index=marshal(result.index), series=series, runs=len(runs), warnings=tuple(warnings)
    )


def evidence_version() -> tuple[object, ...]:
    """A cheap value that changes whenever anything published changes: evidence rows are only
    inserted or withdrawn (never otherwise edited or deleted), and a signer's class or counting
    never changes without a ``SignerClassChange`` row. Two aggregate queries."""
    evidence = Evidence.objects.aggregate(
        newest=Max("id"),
        rows=Count("id"),
        withdrawn=Count("withdrawn_at"),
        last=Max("withdrawn_at"),
    )
    changes = SignerClassChange.objects.aggregate(newest=Max("id"), rows=Count("id"))
    return (*evidence.values(), *changes.values())


def _cache_key() -> str:
    parts = [re.sub(r"[^0-9A-Za-z._-]", "_", str(part)) for part in evidence_version()]
    return f"{CACHE_PREFIX}:" + ":".join(parts)


def publication_current() -> Publication:
    """The published files for the evidence as it is now (cached per evidence generation)."""
    key = _cache_key()
    publication: Publication | None = cache.get(key)
    if publication is None:
        publication = publication_build()
        cache.set(key, publication, CACHE_TIMEOUT)
    return publication
