"""The identity tuple of one stored evidence record, read from its bytes.

One reading for every consumer: ingest stores it on the row (``identity_columns``, so the
qualifications table sorts and filters in SQL), migration 0010 fills the rows stored before
that, and ``service.evidence_identities`` reads it for records it has not cached yet.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from evidence_app.json_shapes import Predicate

from .identity import identity_from_fingerprint, identity_of, merged
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
