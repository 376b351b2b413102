"""AICR's committed evidence index: pointer files under ``recipes/evidence/`` (Django-free).

A pointer is a locator, not evidence: ``recipe``, optional ``profile`` and one attestation
``{attestedAt, bundle{oci, digest, predicateType}, signer?{identity, issuer, rekorLogIndex?}}``
naming a digest-pinned OCI bundle. Nothing here verifies a signature; the site counts a pointer
only once the bundle it names was pulled and verified (``services.pointers``).

Public API:

- ``parse_pointer(body, path=...)`` -> ``Pointer`` (strict, bounded; ``PointerError`` names the
  field);
- ``check_pointer(pointer, rel_path=..., allowlist=...)`` -> ``ContractResult``: AICR CI's
  ``verifier.CheckEvidenceTree`` rules (path, source slug, digest, signer, allowlist);
- ``render_pointer(pointer)`` / ``pointer_rel_path(pointer)``: the file and path AICR's
  repository expects, for publishing evidence back.
"""

from evidence_app.pointers.contract import (
    FLAT,
    MAX_POINTER_BYTES,
    NESTED,
    SCHEMA_VERSION,
    ContractResult,
    Pointer,
    PointerError,
    PointerSigner,
    check_pointer,
    parse_pointer,
    pointer_rel_path,
    registry_of,
    render_pointer,
)

__all__ = [
    "FLAT",
    "MAX_POINTER_BYTES",
    "NESTED",
    "SCHEMA_VERSION",
    "ContractResult",
    "Pointer",
    "PointerError",
    "PointerSigner",
    "check_pointer",
    "parse_pointer",
    "pointer_rel_path",
    "registry_of",
    "render_pointer",
]
