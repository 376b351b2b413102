"""AICR recipe-evidence bundles, written the way ``aicr validate --emit-attestation`` does.

A Django-free port of AICR's ``pkg/evidence/attestation`` (bundle, statement, BOM) and
``pkg/evidence/redact``, used by the demo seeder and by validation runs, so both publish one
bundle format through the same verify-before-count ingest.

Public API:

- ``RecipeInput``, ``BundleInput`` → ``build_summary_bundle(...) -> SummaryBundleFiles``
  (files incl. ``manifest.json`` and ``statement.intoto.json``, unsigned);
- ``redact_ctrf(bytes) -> bytes``, ``redact_snapshot(doc) -> doc`` (AICR's minimal v2 policy);
- ``fingerprint_of(snapshot)``, ``criteria_match(criteria, fingerprint)``;
- ``sign_statement(statement, key)`` (key-signed DSSE bundle) and
  ``summary_tarball(files, signed_bundle)`` (what the ingest accepts).
"""

from __future__ import annotations

from .builder import (
    PREDICATE_V1,
    BundleError,
    BundleInput,
    RecipeInput,
    SummaryBundleFiles,
    build_summary_bundle,
    rfc3339,
)
from .fingerprint import criteria_match, fingerprint_of
from .redact import redact_ctrf, redact_snapshot
from .signing import sign_statement, summary_tarball

__all__ = [
    "PREDICATE_V1",
    "BundleError",
    "BundleInput",
    "RecipeInput",
    "SummaryBundleFiles",
    "build_summary_bundle",
    "criteria_match",
    "fingerprint_of",
    "redact_ctrf",
    "redact_snapshot",
    "rfc3339",
    "sign_statement",
    "summary_tarball",
]
