"""A finished validation run becomes signed AICR evidence, counted like any upload.

``publish_run(run)`` turns a ``passed`` or ``failed`` run into the bundle ``aicr validate
--emit-attestation`` writes (``evidence_app.attestation``: recipe.yaml, the redacted snapshot
and per-phase CTRF, the synthesized BOM, manifest, statement), signs the statement with the
site's key (``evidence_app.services.site_key``), or keyless through Sigstore when an identity
token is configured (``services.keyless``), and sends the tarball through the same
verify-before-count ingest as an upload (channel ``run``). Evidence from a simulated cluster is
stored with ``is_simulated`` and never counts. Runs that ended ``error`` or ``cancelled`` publish
nothing, as AICR writes no CTRF for them.

Predicate (``evidence_predicate_type``): recipe-evidence v3 (the V3 digest, profile when the
recipe has one) for a recipe of a v1.x catalog, the evidence AICR 1.x writes; for older
catalogs v1, or v2 with ``predicate.profile`` for a profiled recipe, as AICR of that age did.

Idempotent: the bytes are a function of the run (BOM serial derived from the run ID, attested
at the run's finish, RFC 6979 signature), so publishing a run twice finds the same evidence.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

from django.conf import settings
from django.utils import timezone

from evidence_app.attestation import (
    BundleError,
    BundleInput,
    RecipeInput,
    build_summary_bundle,
    sign_statement,
    summary_tarball,
)
from evidence_app.attestation.snapshot import SnapshotError, parse_snapshot
from evidence_app.models import Evidence
from evidence_app.services.ingest import evidence_ingest
from evidence_app.services.site_key import (
    SiteKeyUnavailable,
    site_private_key,
    site_signing_key_ensure,
)
from evidence_app.verification.digests import PREDICATE_V3
from evidence_app.verification.statement import PREDICATE_V1, PREDICATE_V2
from recipes_app.models import Catalog, Recipe
from recipes_app.resolver import release_of
from validators_app.models import RunStatus, ValidationRun
from validators_app.orchestrator import resolve_image
from validators_app.services.keyless import KeylessSigningError, identity_token, keyless_sign
from validators_app.services.runs import validator_catalog

CHANNEL = "run"
PUBLISHED_STATUSES = (RunStatus.PASSED, RunStatus.FAILED)


class PublishError(RuntimeError):
    """The run could not become evidence; the message says why (shown on the run)."""


def _catalog_images(catalog: dict[str, Any], *, aicr_version: str) -> list[tuple[str, str, str]]:
    """``(phase, check, image)`` per catalog entry, the image resolved as the run's Jobs used it."""
    resolved = []
    for entry in catalog.get("validators") or []:
        image = entry.get("image") if isinstance(entry, dict) else None
        if isinstance(image, str) and image:
            image = resolve_image(
                image,
                aicr_version=aicr_version,
                aicr_commit=settings.VALIDATION_AICR_COMMIT,
                image_registry=settings.VALIDATION_IMAGE_REGISTRY,
                image_tag=settings.VALIDATION_IMAGE_TAG,
            )
            resolved.append((str(entry.get("phase", "")), str(entry.get("name", "")), image))
    return resolved


def validator_images(catalog: dict[str, Any], *, aicr_version: str) -> list[str]:
    """Every catalog image once, in catalog order, resolved as the run's Jobs used them."""
    return list(dict.fromkeys(i for _, _, i in _catalog_images(catalog, aicr_version=aicr_version)))


def ran_digests(run: ValidationRun, catalog: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    """Resolved catalog image → the repository digests the run's checks of it reported.

    Keyed by the catalog entry each check ran (not the runtime's ``status.image``, which a
    runtime may normalize), so the predicate names the image as the catalog resolves it. A
    check whose runtime reported no digest adds none: nothing is inferred for it.
    """
    image_of = {
        (phase, name): image
        for phase, name, image in _catalog_images(catalog, aicr_version=run.aicr_version)
    }
    found: dict[str, set[str]] = {}
    for phase, name, digest in run.checks.exclude(image_digest="").values_list(
        "phase", "name", "image_digest"
    ):
        image = image_of.get((phase, name))
        if image:
            found.setdefault(image, set()).add(digest)
    return {image: tuple(sorted(digests)) for image, digests in found.items()}


def _bom_serial(run: ValidationRun) -> str:
    # AICR draws a random UUID per bundle; one derived from the run ID keeps publishing
    # idempotent (the same run always gives the same bytes).
    digest = hashlib.sha256(f"aicr-run-bom/{run.aicr_run_id}".encode()).digest()
    return f"urn:uuid:{uuid.UUID(bytes=digest[:16], version=4)}"


def is_v1_catalog(catalog: Catalog) -> bool:
    """A catalog of AICR 1.x: the v1beta1/v1beta2 family, or stamped with a release >= v1.0.0
    (a dev-stamped alpha tree is not)."""
    release = release_of(catalog.aicr_version)
    return catalog.api_family == "v1" or (release is not None and release >= (1, 0, 0))


def evidence_predicate_type(recipe: Recipe) -> str:
    """The predicate a run of ``recipe`` is published with (see the module docstring)."""
    if is_v1_catalog(recipe.catalog):
        return PREDICATE_V3
    return PREDICATE_V2 if recipe.profile else PREDICATE_V1


def bundle_input(run: ValidationRun) -> BundleInput:
    """What the bundle of ``run`` is built from; ``PublishError`` when something is missing."""
    recipe = run.recipe
    reports = run.phase_report_bytes()
    ordered = {phase: reports[phase] for phase in run.phases if phase in reports}
    ordered.update({p: r for p, r in reports.items() if p not in ordered})
    if not ordered:
        raise PublishError("the run has no CTRF reports to publish")
    if not run.snapshot_yaml:
        raise PublishError("the run has no snapshot to publish")
    try:
        snapshot = parse_snapshot(run.snapshot_yaml)
    except SnapshotError as exc:
        raise PublishError(str(exc)) from None
    catalog = validator_catalog(recipe)
    found = catalog.get("metadata")
    metadata: dict[str, Any] = found if isinstance(found, dict) else {}
    return BundleInput(
        recipe=RecipeInput.of(recipe),
        snapshot=snapshot,
        phase_reports=ordered,
        aicr_version=run.aicr_version,
        validator_catalog_version=recipe.catalog.validator_catalog_version
        or str(metadata.get("version") or ""),
        validator_images=validator_images(catalog, aicr_version=run.aicr_version),
        image_digests=ran_digests(run, catalog),
        attested_at=run.finished_at or timezone.now(),
        bom_serial=_bom_serial(run),
        predicate_type=evidence_predicate_type(recipe),
    )


def site_sign(statement: bytes) -> bytes:
    """Keyless when an identity token is configured (``services.keyless``), else the site key.

    A keyless failure is reported, never silently replaced by the site key: the operator
    configured keyless signing and would otherwise publish evidence of another kind.
    """
    try:
        token = identity_token()
        if token:
            return keyless_sign(statement, token=token)
        key = site_private_key()
        site_signing_key_ensure(key)
    except (SiteKeyUnavailable, KeylessSigningError) as exc:
        raise PublishError(str(exc)) from None
    return sign_statement(statement, key)


def run_bundle(run: ValidationRun) -> bytes:
    """The signed ``summary-bundle`` tarball of ``run``."""
    try:
        bundle = build_summary_bundle(bundle_input(run))
    except BundleError as exc:
        raise PublishError(str(exc)) from None
    return summary_tarball(bundle.files, site_sign(bundle.statement))


def publish_run(run: ValidationRun) -> Evidence | None:
    """The evidence of a passed or failed run (None for any other status).

    Raises ``PublishError`` with the reason when the bundle cannot be built or signed (no or
    a revoked site key, a keyless failure), or the ingest refuses it, naming the step (e.g.
    ``signature`` when the keyless instance's root is not trusted here).
    """
    if run.outcome_status not in PUBLISHED_STATUSES:  # passed/failed, or publishing it
        return None
    data = run_bundle(run)
    result = evidence_ingest(
        data=data,
        artifact=None,
        filename=f"run-{run.aicr_run_id}.tar.gz",
        user=run.created_by,
        channel=CHANNEL,
        is_simulated=run.cluster.is_simulated,
    )
    if not result.ok or result.evidence is None:
        raise PublishError(
            f"the ingest refused the run's bundle at step {result.failed_step or '?'}: "
            f"{result.reason}"
        )
    return result.evidence
