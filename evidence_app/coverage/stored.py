"""The identity tuple of one stored evidence record, read from its bytes.

One reading for every consumer: ingest stores it on the row (``identity_columns``, so the
qualifications table sorts and filters in SQL; ``identities_of_stored`` for every recorded
identity with its source and state, ``Evidence.identities``), migrations 0010 and 0011 fill
the rows stored before that. Nothing recomputes them per request.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from evidence_app.json_shapes import Predicate

from .identity import LABELS, identity_from_fingerprint, identity_of, merged
from .recorded import REDACTED, parse_json, recorded_identities
from .recorded import identity as recorded_identity
from .snapshot_input import SnapshotInputError, read_snapshot_input

SUMMARY_BUNDLE = "summary-bundle"  # Container.SUMMARY_BUNDLE, without importing the models
_MAX_GPU_COUNT = 2**31 - 1  # the column is a 32-bit integer on every database


class StoredEvidence(Protocol):
    """What the reading needs: an ``Evidence`` row, or migration 0010's historical one."""

    predicate: Predicate
    aicr_version: str
    container: str
    content: Any


def identity_of_stored(evidence: StoredEvidence) -> dict[str, str | None]:
    """The predicate's fingerprint, completed by the summary bundle's snapshot when it has one."""
    predicate = evidence.predicate
    fingerprint = predicate.get("fingerprint")
    aicr_version = str(predicate.get("aicrVersion") or evidence.aicr_version or "")
    base = identity_from_fingerprint(
        fingerprint if isinstance(fingerprint, Mapping) else {}, aicr_version=aicr_version
    )
    if evidence.container != SUMMARY_BUNDLE:
        return base
    # Imported here: the verification package pulls in sigstore, needed only for tarballs.
    from evidence_app.verification.summary_bundle import SummaryBundleError, open_summary_bundle

    try:
        files = open_summary_bundle(bytes(evidence.content)).files
        snapshot = read_snapshot_input(files["snapshot.yaml"]) if "snapshot.yaml" in files else {}
    except (SummaryBundleError, SnapshotInputError, KeyError, OSError, ValueError):
        return base
    return merged(identity_of(snapshot, aicr_version=aicr_version), base)


ValuesReader = Callable[[str], Any]  # a catalog values file by path, parsed (None: absent)


def _bundle_files(evidence: StoredEvidence) -> Mapping[str, bytes]:
    if evidence.container != SUMMARY_BUNDLE:
        return {}
    from evidence_app.verification.summary_bundle import SummaryBundleError, open_summary_bundle

    try:
        return open_summary_bundle(bytes(evidence.content)).files
    except (SummaryBundleError, OSError, ValueError):
        return {}


def _allocation(read: ValuesReader | None) -> Callable[[Mapping[str, Any]], str | None]:
    def resolve(recipe: Mapping[str, Any]) -> str | None:
        # Imported here: validators_app's orchestrator is not needed for bundle-less rows.
        from validators_app.orchestrator.allocation import resolve_gpu_allocation_policy
        from validators_app.orchestrator.model import InvalidRecipeInput

        try:
            return resolve_gpu_allocation_policy(recipe, read=read or (lambda _path: None))
        except (InvalidRecipeInput, ValueError, TypeError, KeyError):
            # A contradictory configuration, or a values file this site does not hold: the
            # bundle does not tell the policy, so it is "not recorded", never guessed.
            return None

    return resolve


def identities_of_stored(
    evidence: StoredEvidence, *, read_values: ValuesReader | None = None
) -> dict[str, Any]:
    """``coverage.recorded.recorded_identities`` of a stored row: its predicate, and for a
    summary bundle its snapshot, BOM, CTRF and recipe (``read_values``: the values files of
    the catalog the recipe came from, for the GPU allocation policy)."""
    files = _bundle_files(evidence)
    snapshot = None
    if "snapshot.yaml" in files:
        try:
            snapshot = read_snapshot_input(files["snapshot.yaml"])
        except SnapshotInputError:
            snapshot = None
    recipe = None
    if "recipe.yaml" in files:
        from evidence_app.attestation.snapshot import SnapshotError, parse_snapshot

        try:
            recipe = parse_snapshot(files["recipe.yaml"].decode("utf-8"))
        except (SnapshotError, UnicodeDecodeError):
            recipe = None
    ctrf = [
        doc
        for path in sorted(files)
        if path.startswith("ctrf/") and (doc := parse_json(files[path])) is not None
    ]
    predicate: Mapping[str, Any] = evidence.predicate
    if not predicate.get("aicrVersion") and evidence.aicr_version:
        predicate = {**predicate, "aicrVersion": evidence.aicr_version}
    return recorded_identities(
        predicate,
        snapshot=snapshot,
        bom=parse_json(files.get("bom.cdx.json")),
        ctrf=ctrf,
        recipe=recipe,
        allocation=_allocation(read_values),
    )


def gpu_count_number(text: str | None) -> int | None:
    """``gpu_count`` as a number to sort on; ``None`` unless it is a plain count."""
    if text is None or not text.isascii() or not text.isdigit():
        return None
    value = int(text)
    return value if value <= _MAX_GPU_COUNT else None


def identity_columns(evidence: StoredEvidence) -> dict[str, Any]:
    """The ``Evidence`` columns that hold the identity: the tuple and its sortable parts."""
    identity = identity_of_stored(evidence)
    return {
        "identity": identity,
        "gpu_model": (identity.get("gpu_model") or "")[:200],
        "gpu_count": gpu_count_number(identity.get("gpu_count")),
    }


# --- the tuple /check/ compares ---------------------------------------------------------------

CheckTuple = tuple[dict[str, str | None], frozenset[str]]


def check_tuple(identities: Mapping[str, Any] | None, identity: Mapping[str, Any]) -> CheckTuple:
    """The identity tuple ``/check/`` compares, and the keys the bundle's redaction removed:
    from the identities recorded at ingest (``Evidence.identities``), or for a row stored
    before those were recorded, its ``Evidence.identity`` columns (nothing redacted known)."""
    if not identities:
        return {k: identity.get(k) for k in LABELS}, frozenset()
    found = {k: recorded_identity(identities, k) for k in LABELS}
    return (
        {k: i.value for k, i in found.items()},
        frozenset(k for k, i in found.items() if i.state == REDACTED),
    )


def identity_key(identities: Mapping[str, Any] | None, identity: Mapping[str, Any]) -> str:
    """``check_tuple`` as a sha256 (``Evidence.identity_key``): records with equal keys compare
    alike, so ``/check/`` reads one record's identities per key, not every record's."""
    theirs, redacted = check_tuple(identities, identity)
    text = json.dumps([[theirs.get(k) for k in LABELS], sorted(redacted)], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()
