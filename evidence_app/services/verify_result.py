"""``aicr evidence verify``'s result, for any input this site can verify (AICR-V1.md §9).

AICR's JSON: ``input`` (``dir`` | ``pointer`` | ``oci``; this site adds ``tarball`` and
``bundle`` for the files it takes), ``pointer?``, ``predicate?``, ``signer?{identity, issuer,
rekorLogIndex?}``, ``recipeName?``, ``bundleDigest?``, ``steps[{step, name, status, detail?,
subRows?[{key, value}]}]`` and ``exit``: 0 valid and every phase passed, 1 valid with phase
failures, 2 invalid. The field names are AICR's (``pkg/evidence/verifier/types.go@5163631b``);
the step names and details are this site's verification steps (``parse``, ``signature``,
``statement``, ``manifest``), since AICR's own step texts are not known offline, and ``step``
is the step's number. ``process_exit`` is what ``aicr evidence verify`` exits with for each
verdict (AICR.md §4.5: 0 for valid, 2 for phase failures and for invalid).

The signature is checked under this site's trust policy (trusted roots, registered keys),
pinned to ``expected_issuer`` / ``expected_identity_regexp`` when given — or, for a pointer
input, to the signer the pointer claims, as AICR's ingest does.
"""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evidence_app.pointers import Pointer, PointerError, parse_pointer
from evidence_app.services import oci
from evidence_app.services.ingest.policy import policy_current
from evidence_app.verification import AicrStatement
from evidence_app.verification.pipeline import VerificationReport, verify_evidence
from evidence_app.verification.transcript import steps_from_transcript

VALID = 0
VALID_WITH_FAILURES = 1
INVALID = 2
#: AICR's process exit status for each ``exit`` verdict.
PROCESS_EXIT = {VALID: 0, VALID_WITH_FAILURES: 2, INVALID: 2}
MAX_INPUT_BYTES = 64 * 1024 * 1024
MAX_DIRECTORY_FILES = 1000


class VerifyInputError(ValueError):
    """The input is not something ``verify`` can read (names what is wrong)."""


@dataclass
class VerifyResult:
    input: str
    steps: list[dict[str, Any]] = field(default_factory=list)
    exit: int = INVALID
    pointer: dict[str, Any] | None = None
    predicate: dict[str, Any] | None = None
    signer: dict[str, Any] | None = None
    recipe_name: str | None = None
    bundle_digest: str | None = None

    @property
    def process_exit(self) -> int:
        return PROCESS_EXIT[self.exit]

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"input": self.input}
        optional = {
            "pointer": self.pointer,
            "predicate": self.predicate,
            "signer": self.signer,
            "recipeName": self.recipe_name,
            "bundleDigest": self.bundle_digest,
        }
        out.update({key: value for key, value in optional.items() if value is not None})
        out["steps"] = self.steps
        out["exit"] = self.exit
        return out


def _phases_of(statement: AicrStatement) -> dict[str, dict[str, int]]:
    return {
        name: {"passed": s.passed, "failed": s.failed, "skipped": s.skipped}
        for name, s in statement.phases.items()
    }


def _directory_tarball(path: Path) -> bytes:
    """A ``summary-bundle`` directory (or one holding it) as an in-memory tar; bounded."""
    files = sorted(p for p in path.rglob("*") if p.is_file() and not p.is_symlink())
    if len(files) > MAX_DIRECTORY_FILES:
        raise VerifyInputError(f"{path}: more than {MAX_DIRECTORY_FILES} files")
    if not (path / "manifest.json").is_file() and not (path / "summary-bundle").is_dir():
        raise VerifyInputError(f"{path}: not an evidence directory (no manifest.json)")
    out = io.BytesIO()
    total = 0
    with tarfile.open(fileobj=out, mode="w") as tar:
        for file in files:
            total += file.stat().st_size
            if total > MAX_INPUT_BYTES:
                raise VerifyInputError(f"{path}: larger than {MAX_INPUT_BYTES} bytes")
            tar.add(file, arcname=str(file.relative_to(path)), recursive=False)
    return out.getvalue()


def _read_file(path: Path) -> bytes:
    if path.stat().st_size > MAX_INPUT_BYTES:
        raise VerifyInputError(f"{path}: larger than {MAX_INPUT_BYTES} bytes")
    return path.read_bytes()


def _report(
    data: bytes,
    *,
    expected_issuer: str | None,
    expected_identity_regexp: str | None,
    oci_manifest_digest: str | None = None,
    artifact: bytes | None = None,
) -> VerificationReport:
    policy = policy_current()
    return verify_evidence(
        data,
        trusted_root=policy.trusted_roots,
        issuer=[expected_issuer] if expected_issuer else policy.issuers,
        identity_regex=expected_identity_regexp or policy.identity_regex,
        extra_policies=policy.extra_policies or None,
        public_keys=policy.public_keys,
        oci_manifest_digest=oci_manifest_digest,
        artifact=artifact,
        # Unpinned, aicr accepts any issuer the trusted root vouches for; the upload path
        # reports such a signer instead of refusing it. Pinned, the pin must hold.
        report_unlisted_issuers=not expected_issuer,
    )


def _result(
    kind: str, report: VerificationReport, *, bundle_digest: str, pinned: bool = False
) -> VerifyResult:
    statement = report.statement
    result = VerifyResult(input=kind, bundle_digest=bundle_digest)
    outcome = report.outcome
    if pinned and outcome is not None and outcome.ok and outcome.mode == "key":
        result.steps = steps_from_transcript(report.transcript.to_list()[:2])
        result.steps.append(
            {
                "step": len(result.steps) + 1,
                "name": "signer",
                "status": "failed",
                "detail": "a key-signed bundle has no certificate identity for "
                "--expected-issuer / --expected-identity-regexp to pin",
            }
        )
        return result
    if outcome is not None and outcome.ok and outcome.signer is not None:
        signer: dict[str, Any] = {
            "identity": outcome.signer.identity,
            "issuer": outcome.signer.issuer,
        }
        if outcome.signer.rekor_log_index is not None:
            signer["rekorLogIndex"] = outcome.signer.rekor_log_index
        result.signer = signer
    phases = _phases_of(statement) if statement is not None else None
    result.steps = steps_from_transcript(report.transcript.to_list(), phases=phases)
    if statement is None or not report.transcript.ok:
        return result
    result.recipe_name = statement.recipe_name
    result.predicate = {
        "type": statement.predicate_type,
        "recipe": {"name": statement.recipe_name, "digest": statement.recipe_digest},
        "aicrVersion": statement.aicr_version,
        "attestedAt": f"{statement.attested_at:%Y-%m-%dT%H:%M:%SZ}",
    }
    failed = any(summary["failed"] for summary in (phases or {}).values())
    result.exit = VALID_WITH_FAILURES if failed else VALID
    return result


def _refused(kind: str, name: str, detail: str, **fields: Any) -> VerifyResult:
    return VerifyResult(
        input=kind,
        steps=[{"step": 1, "name": name, "status": "failed", "detail": detail}],
        exit=INVALID,
        **fields,
    )


def verify_input(
    text: str,
    *,
    expected_issuer: str | None = None,
    expected_identity_regexp: str | None = None,
    artifact: bytes | None = None,
) -> VerifyResult:
    """Verify what ``aicr evidence verify <input>`` takes: a pointer file, a digest-pinned OCI
    reference, an evidence directory, a tarball (and a Sigstore bundle file, with the
    ``artifact`` it signs for a message signature: this site's addition).
    ``VerifyInputError`` when the input itself cannot be read."""
    if expected_identity_regexp is not None:
        try:
            re.compile(expected_identity_regexp)
        except re.error as exc:
            raise VerifyInputError(f"--expected-identity-regexp is not a regex: {exc}") from None
    pinned = bool(expected_issuer or expected_identity_regexp)
    path = Path(text)
    if path.is_dir():
        data = _directory_tarball(path)
        report = _report(
            data,
            expected_issuer=expected_issuer,
            expected_identity_regexp=expected_identity_regexp,
        )
        return _result("dir", report, bundle_digest=_sha256(data), pinned=pinned)
    if path.is_file():
        data = _read_file(path)
        if path.suffix in (".yaml", ".yml"):
            return _verify_pointer(
                data,
                expected_issuer=expected_issuer,
                expected_identity_regexp=expected_identity_regexp,
            )
        report = _report(
            data,
            expected_issuer=expected_issuer,
            expected_identity_regexp=expected_identity_regexp,
            artifact=artifact,
        )
        return _result(report.kind, report, bundle_digest=_sha256(data), pinned=pinned)
    if "/" in text and (":" in text or "@" in text):  # parse_oci_ref names what is wrong
        return _verify_oci(
            text,
            expected_issuer=expected_issuer,
            expected_identity_regexp=expected_identity_regexp,
        )
    raise VerifyInputError(
        f"{text[:200]!r}: no such file or directory, and not a digest-pinned OCI reference "
        "(registry/repository@sha256:<digest>)"
    )


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _verify_oci(
    text: str,
    *,
    expected_issuer: str | None,
    expected_identity_regexp: str | None,
    pointer: dict[str, Any] | None = None,
    kind: str = "oci",
) -> VerifyResult:
    try:
        ref = oci.parse_oci_ref(text)
        oci.registry_permitted(ref)
    except oci.OciError as exc:
        return _refused(kind, "pull", exc.message, pointer=pointer)
    return verify_pulled_ref(
        ref,
        expected_issuer=expected_issuer,
        expected_identity_regexp=expected_identity_regexp,
        pointer=pointer,
        kind=kind,
    )


def verify_pulled_ref(
    ref: oci.OciRef,
    *,
    expected_issuer: str | None = None,
    expected_identity_regexp: str | None = None,
    pointer: dict[str, Any] | None = None,
    kind: str = "oci",
) -> VerifyResult:
    """Pull ``ref`` and verify it as ``aicr evidence verify <oci-ref>`` does, storing nothing.
    The caller decided the registry may be pulled from (``registry_permitted`` for a user's
    reference; the push registry for what this site just pushed there)."""
    try:
        pulled = oci.oci_pull(ref)
    except oci.OciError as exc:
        return _refused(kind, "pull", exc.message, pointer=pointer)
    report = _report(
        pulled.data,
        expected_issuer=expected_issuer,
        expected_identity_regexp=expected_identity_regexp,
        oci_manifest_digest=pulled.manifest_digest,
    )
    pinned = bool(expected_issuer or expected_identity_regexp)
    result = _result(kind, report, bundle_digest=pulled.manifest_digest, pinned=pinned)
    result.pointer = pointer
    return result


def _pointer_json(pointer: Pointer) -> dict[str, Any]:
    """The pointer as written (AICR's field names)."""
    attestation: dict[str, Any] = {
        "attestedAt": f"{pointer.attested_at:%Y-%m-%dT%H:%M:%SZ}",
        "bundle": {
            "oci": pointer.oci,
            "digest": pointer.pinned_digest,
            "predicateType": pointer.predicate_type,
        },
    }
    if pointer.signer is not None:
        signer: dict[str, Any] = {
            "identity": pointer.signer.identity,
            "issuer": pointer.signer.issuer,
        }
        if pointer.signer.rekor_log_index is not None:
            signer["rekorLogIndex"] = pointer.signer.rekor_log_index
        attestation["signer"] = signer
    out: dict[str, Any] = {"schemaVersion": pointer.schema_version, "recipe": pointer.recipe}
    if pointer.profile:
        out["profile"] = pointer.profile
    out["attestations"] = [attestation]
    return out


def _verify_pointer(
    data: bytes,
    *,
    expected_issuer: str | None,
    expected_identity_regexp: str | None,
) -> VerifyResult:
    try:
        pointer = parse_pointer(data)
    except PointerError as exc:
        return _refused("pointer", "pointer", str(exc))
    shown = _pointer_json(pointer)
    if pointer.signer is None:
        return _refused(
            "pointer", "pointer", "the pointer names no signer (pending signature)", pointer=shown
        )
    if not pointer.pinned_oci:
        return _refused("pointer", "pointer", "the pointer pins no bundle digest", pointer=shown)
    # Pinned to the signer the pointer claims, as AICR's ingest verifies it.
    issuer = expected_issuer or pointer.signer.issuer
    identity = expected_identity_regexp or f"^{re.escape(pointer.signer.identity)}$"
    result = _verify_oci(
        pointer.pinned_oci,
        expected_issuer=issuer,
        expected_identity_regexp=identity,
        pointer=shown,
        kind="pointer",
    )
    if result.recipe_name is not None and result.recipe_name != pointer.recipe:
        result.steps.append(
            {
                "step": len(result.steps) + 1,
                "name": "pointer",
                "status": "failed",
                "detail": f"the bundle attests recipe {result.recipe_name!r}, the pointer names "
                f"{pointer.recipe!r}",
            }
        )
        result.exit = INVALID
    return result
