"""Verify-before-count ingest: uploaded bytes → a verified, bound, classified Evidence record.

Steps, each a transcript line ``{step, ok, detail}``, stopping at the first failure:

``parse``      the bytes are a Sigstore bundle (v0.1-v0.3, or a bare DSSE envelope), or an AICR
               evidence directory as tar / tar.gz carrying ``attestation.intoto.jsonl``;
``signature``  keyless against the enabled ``TrustRoot`` rows (issuer policy: see
               ``services.signers``), or key-signed against the active ``SigningKey`` rows;
``statement``  the in-toto statement is AICR recipe evidence;
``manifest``   (tarballs) every file matches ``manifest.json`` and the predicate's digests;
``bind``       the subject digest is some catalog version's recipe digest (the current catalog
               preferred; an older catalog's recipe binds to that row and is stale);
``classify``   the signer's class and weight from the allowlist in force / registered keys.

Verdicts: ``verified``; ``invalid`` (malformed, bad signature, tampered files);
``unsupported`` (a format the verifiers cannot check); ``rejected`` (not acceptable evidence:
not AICR recipe evidence, unknown recipe, unsigned, too large). Only a verified upload writes
rows (Signer, SignerClassChange, Evidence); every upload writes one ``UploadLog``.

Identity: one Evidence per signed statement and signer — ``(signer, payload_sha256)``, the
sha256 of the verified DSSE payload (the in-toto statement bytes) and the verified signer
(``Signer.source_id``: sha256 of the certificate's issuer and identity, or of the registered
key's fingerprint), a unique constraint. Whatever wrapper carries the statement (bundle JSON
formatting, tarball compression or tar layout, with or without the artifact, an OCI copy, a new
certificate for the same identity), an upload of a known statement answers with the
existing record (outcome ``existing``) — a withdrawn one included, which stays withdrawn and
says so — also when two uploads race. The uploaded bytes' sha256 stays unique too: the same
bytes are the same record.

Modules, in the order an upload meets them: ``policy`` (what a signature must satisfy),
``service`` (the workflow), ``bind``, ``record`` (the stored columns), ``store`` (the
transaction), ``upload_log`` (every upload's log row, early refusals, ``busy``), ``result``.
Every path returns an ``IngestResult`` whose ``outcome`` (``UploadOutcome``) says what happened;
the views choose the HTTP status from it (``evidence_app.upload_status``).
"""

from evidence_app.services.ingest.policy import (
    policy_current,
    policy_snapshot,
)
from evidence_app.services.ingest.result import IngestResult
from evidence_app.services.ingest.service import ExpectedSigner, evidence_ingest
from evidence_app.services.ingest.upload_log import (
    RETRY_AFTER_SECONDS,
    max_upload_bytes,
    refuse_if_too_large,
    upload_refused,
)

__all__ = [
    "RETRY_AFTER_SECONDS",
    "ExpectedSigner",
    "IngestResult",
    "evidence_ingest",
    "max_upload_bytes",
    "policy_current",
    "policy_snapshot",
    "refuse_if_too_large",
    "upload_refused",
]
