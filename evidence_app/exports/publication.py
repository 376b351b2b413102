"""This site's consensus in AICR's own dashboard format: ``index.json`` and
``series/<recipe>.json`` (schema ``aicr-corroboration/v1``), written by the port of AICR's
generator (``corroborate.build_from_runs``, byte-identical to the Go tool on its fixtures).

The runs are the stored evidence that is verified and not withdrawn, and by default neither demo
nor simulated: AICR never lets simulated results reach its public dashboard (AICR issue #1278),
and a dashboard fed from this one cannot tell demo evidence from real. ``include`` (the
``?include=demo,simulated`` query option) adds them, each kind under its own zero-weight
source (``sample_issuer``: AICR's consensus never counts a source that is not allowlisted,
and a signer that also signs real runs keeps its real column unmixed), and ``labels.json``
names those sources. The label is that separate document, not a field added to
``index.json``, so ``index.json`` stays exactly the bytes AICR's generator writes for the same
runs (its reader would ignore an unknown field, but nobody could then diff the two). A signer
this site counts is ``allowlisted`` (AICR's weight 1), any other verified signer is reported
with weight 0, exactly as AICR's generator treats an unlisted signer; the class is this site's
(``registered-key`` included, a class AICR itself does not have). Key-signed runs carry the key
as their identity (issuer ``key``, identity ``sha256:<fingerprint>``) because AICR's model
needs both to tell signers apart.

``publication_build`` is the whole build; no request runs it: a Celery task does and stores
the files (``exports.artefact``), and the views serve the last stored build.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Q

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
from evidence_app.corroborate import source_id as aicr_source_id
from evidence_app.models import Evidence, SignerClassChange, SignerTally, Verdict

KEY_ISSUER = "key"
SAMPLE_KINDS = ("demo", "simulated")  # left out unless asked for
LABELS_SCHEMA = "aicr-dashboard-site-labels/v1"


class IncludeError(ValueError):
    """An ``include`` value this publication does not know."""


def include_parse(value: str | None) -> frozenset[str]:
    """``"demo,simulated"`` → the sample kinds to include; ``IncludeError`` names a bad one."""
    kinds = frozenset(part.strip() for part in (value or "").split(",") if part.strip())
    unknown = sorted(kinds - set(SAMPLE_KINDS))
    if unknown:
        raise IncludeError(
            f"include: unknown value {unknown[0][:40]!r}; use a comma-separated list of "
            + ", ".join(SAMPLE_KINDS)
        )
    return kinds


def sample_kinds(evidence: Evidence) -> tuple[str, ...]:
    return tuple(
        kind
        for kind, flag in (("demo", evidence.is_demo), ("simulated", evidence.is_simulated))
        if flag
    )


def sample_issuer(kinds: Iterable[str], issuer: str) -> str:
    """The issuer an included demo/simulated run is published under (``simulated:<issuer>``).
    AICR's generator keys a source and its consensus by the verified (issuer, identity), never
    by ``idHash``, so a sample signed by a signer that also signs real runs needs a distinct
    pair, or its newest run would stand in for the real one. This site already names key-signed
    runs' issuer ``key``; ``labels.json`` says what each such issuer means."""
    return "+".join(kinds) + ":" + issuer


@dataclass(frozen=True)
class Publication:
    """The generator's files: ``index.json`` and recipe name → series bytes."""

    index: bytes
    series: dict[str, bytes]
    runs: int
    warnings: tuple[str, ...]
    labels: bytes  # labels.json: which sources are demo or simulated samples
    include: frozenset[str]
    left_out: dict[str, int]  # kind → verified runs of that kind not included


def _iso(evidence: Evidence) -> str:
    return evidence.attested_at.isoformat().replace("+00:00", "Z")


def _published() -> Any:
    return Evidence.objects.filter(verdict=Verdict.VERIFIED, withdrawn_at__isnull=True)


def dashboard_runs(
    warnings: list[str], include: frozenset[str] = frozenset(), labels: dict[str, Any] | None = None
) -> list[Run]:
    """Every publishable evidence row as one of AICR's admitted runs; demo and simulated rows
    only when ``include`` names their kind, under a sample source recorded in ``labels``."""
    rows = _published()
    if "demo" not in include:
        rows = rows.filter(is_demo=False)
    if "simulated" not in include:
        rows = rows.filter(is_simulated=False)
    rows = (
        rows.select_related("signer", "signer__key", "recipe")
        .only(
            "pk",
            "sha256",
            "recipe_name",
            "attested_at",
            "aicr_version",
            "k8s_version",
            "rekor_log_index",
            "check_results",
            "is_demo",
            "is_simulated",
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
        source_id, allowlisted = signer.source_id, signer.counted
        kinds = sample_kinds(evidence)
        if kinds:  # included on request: its own source, never weighed in consensus
            real_id = aicr_source_id(issuer, identity)
            issuer, allowlisted = sample_issuer(kinds, issuer), False
            source_id = aicr_source_id(issuer, identity)
            if labels is not None:
                labels[source_id] = {"kinds": list(kinds), "issuer": issuer, "realSource": real_id}
        meta = RunMeta(
            coordinate=coordinate,
            recipe=evidence.recipe_name,
            signer=Signer(
                id_hash=source_id,
                identity=identity,
                issuer=issuer,
                class_=signer.signer_class,
                allowlisted=allowlisted,
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


def _left_out(include: frozenset[str]) -> dict[str, int]:
    counts = _published().aggregate(
        demo=Count("id", filter=Q(is_demo=True)), simulated=Count("id", filter=Q(is_simulated=True))
    )
    return {kind: counts[kind] for kind in SAMPLE_KINDS if kind not in include}


def publication_build(include: frozenset[str] = frozenset()) -> Publication:
    warnings: list[str] = []
    labels: dict[str, Any] = {}
    runs = dashboard_runs(warnings, include, labels)
    result = build_from_runs(runs, warnings)
    series = {name: marshal(body) for name, body in result.series.items() if safe_recipe_slug(name)}
    labels_doc = {
        "schema": LABELS_SCHEMA,
        "include": sorted(include),
        "note": "Sources listed here are demo or simulated samples published on request: "
        "they are not allowlisted, so AICR's consensus never counts them.",
        "sources": dict(sorted(labels.items())),
    }
    return Publication(
        index=marshal(result.index),
        series=series,
        runs=len(runs),
        warnings=tuple(warnings),
        labels=(json.dumps(labels_doc, indent=2) + "\n").encode(),
        include=include,
        left_out=_left_out(include),
    )


def evidence_version() -> str:
    """A cheap value that changes whenever anything published changes: evidence rows are only
    inserted or withdrawn (never otherwise edited; a deletion changes the tallied row count),
    a signer's class or counting never changes without a ``SignerClassChange`` row, and a
    recipe's coordinates only with a new catalog version. Each figure reads an index or the
    signer tallies (at 1,000,000 records a ``COUNT`` over the evidence took most of a second)."""
    from django.db import connection

    from recipes_app.models import Catalog

    def table(model: Any) -> str:
        return connection.ops.quote_name(model._meta.db_table)

    evidence, withdrawn = table(Evidence), "withdrawn_at IS NOT NULL"
    # One statement (a read of the publication costs it and one document row); identifiers
    # from the models, no values.
    sql = (
        f"SELECT (SELECT MAX(id) FROM {evidence}), "  # noqa: S608
        f"(SELECT COALESCE(SUM(records), 0) FROM {table(SignerTally)}), "
        f"(SELECT COUNT(*) FROM {evidence} WHERE {withdrawn}), "
        f"(SELECT MAX(withdrawn_at) FROM {evidence} WHERE {withdrawn}), "
        f"(SELECT MAX(id) FROM {table(SignerClassChange)}), "
        f"(SELECT COUNT(*) FROM {table(SignerClassChange)}), "
        f"(SELECT MAX(id) FROM {table(Catalog)})"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql)
        parts = cursor.fetchone()
    return ":".join(re.sub(r"[^0-9A-Za-z._-]", "_", str(part)) for part in parts)
