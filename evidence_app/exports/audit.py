"""Re-verify an audit package (``exports.package``) offline: no database, no network.

``audit_verify(path, pinned_key=…)`` reads the ``tar.gz`` (regular files only, bounded sizes,
no absolute or ``..`` paths), then checks, naming every problem it finds:

1. the manifest's signature, made by the pinned site key (the package's own ``site-key.pub`` must
   be that key: a package re-signed with another key is refused);
2. every file against ``MANIFEST.sha256``: none missing, altered or unlisted;
3. every record's bundle against the trusted roots, keys and issuer policy in the package
   (``verification.verify_evidence``, the site's own verifier), and the record against what the
   bundle proves: sha256, recipe name and digest, signer, attestedAt, versions, CTRF statuses;
4. every recipe digest against the recipe YAML in the package (sha256 of the bytes);
5. ``consensus.json`` against the consensus recomputed from ``records.ndjson``.

A package is *unreadable* (``PackageUnreadable``, ``verify_audit``'s exit 2, the member named)
when a header declares more than the limits allow (checked from the raw tar headers before any
member is read) or when one of its JSON members (``package.json``, ``consensus.json``,
``trust/policy.json``, ``recipes/index.json``, a ``records.ndjson`` line) is refused by the
bounded loader: a 100,000-deep ``consensus.json`` is unreadable, not a problem found in it. A
member that decodes but is the wrong shape is a problem (exit 1).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import tarfile
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from evidence_app.consensus import package_consensus
from evidence_app.exports.package import (
    FORMAT,
    MANIFEST,
    SIGNATURE,
    SITE_KEY,
    UNSIGNED_FILES,
    package_checks,
)
from evidence_app.exports.signing import key_fingerprint, load_public_key, manifest_signature_ok
from evidence_app.services.versions import SupportedRange, parse_supported_range
from evidence_app.verification._json import JSONLimitError, JSONLimits, load_json
from evidence_app.verification.pipeline import verify_evidence
from evidence_app.verification.summary_bundle import SummaryBundle
from evidence_app.verification.tarscan import TarHeaderError, check_tar_headers
from evidence_app.verification.trust import TrustRoot, TrustRootError, load_trust_root

MAX_MEMBER_BYTES = 64 * 1024 * 1024
MAX_TOTAL_BYTES = 4 * 1024 * 1024 * 1024
MAX_MEMBERS = 1_000_000
# The package's JSON (package.json, consensus.json, one records.ndjson line) is as untrusted
# as the rest: bounded like every other JSON, sized for a whole site's export.
PACKAGE_JSON_LIMITS = JSONLimits(
    max_bytes=MAX_MEMBER_BYTES,
    max_depth=64,
    max_object_keys=1_000_000,
    max_values=20_000_000,
    max_number_chars=40,
)
_MANIFEST_LINE = re.compile(r"^([0-9a-f]{64})  ([^\n]+)$")

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_UNREADABLE = 2


class PackageUnreadable(ValueError):
    """Not a package this checker can open (not a tar.gz, unsafe or oversized members)."""


@dataclass(frozen=True)
class Problem:
    code: str
    path: str
    detail: str


@dataclass
class AuditReport:
    package: str
    records: int = 0
    bundles_verified: int = 0
    files: int = 0
    recipes_checked: int = 0
    consensus_recipes: int = 0
    site_key_fingerprint: str = ""
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def problem(self, code: str, path: str, detail: str) -> None:
        self.problems.append(Problem(code, path, detail))

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, **asdict(self)}


def read_package(path: Path) -> dict[str, bytes]:
    """Path → bytes of every regular file in the tar.gz."""
    files: dict[str, bytes] = {}
    total = 0
    try:
        # The raw headers first: tarfile reads a long-name or PAX header's declared size whole.
        with gzip.open(path, "rb") as stream:
            check_tar_headers(
                stream,
                max_member_bytes=MAX_MEMBER_BYTES,
                max_total_bytes=MAX_TOTAL_BYTES,
                max_members=MAX_MEMBERS,
            )
    except TarHeaderError as exc:
        raise PackageUnreadable(str(exc)) from None
    except (OSError, EOFError, zlib.error) as exc:
        raise PackageUnreadable(f"not a readable tar.gz ({exc})") from None
    try:
        with tarfile.open(path, mode="r:gz") as tar:
            for count, member in enumerate(tar, start=1):
                if count > MAX_MEMBERS:
                    raise PackageUnreadable(f"more than {MAX_MEMBERS} members")
                name = member.name
                if name.startswith("/") or ".." in name.split("/") or not name:
                    raise PackageUnreadable(f"unsafe member path {name[:200]!r}")
                if member.isdir():
                    continue
                if not member.isfile():
                    raise PackageUnreadable(f"{name[:200]}: not a regular file (link or device)")
                if member.size > MAX_MEMBER_BYTES:
                    raise PackageUnreadable(f"{name[:200]}: larger than {MAX_MEMBER_BYTES} bytes")
                total += member.size
                if total > MAX_TOTAL_BYTES:
                    raise PackageUnreadable(f"more than {MAX_TOTAL_BYTES} bytes in all")
                if name in files:
                    raise PackageUnreadable(f"{name[:200]}: present twice")
                handle = tar.extractfile(member)
                files[name] = handle.read() if handle is not None else b""
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise PackageUnreadable(f"not a readable tar.gz ({exc})") from None
    return files


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def package_json(data: bytes, *, member: str) -> Any:
    """``data`` decoded by the bounded loader; ``PackageUnreadable`` naming ``member`` when the
    loader refuses it (the one place the package's JSON is parsed)."""
    try:
        return load_json(data, what=member, limits=PACKAGE_JSON_LIMITS)
    except JSONLimitError as exc:
        raise PackageUnreadable(str(exc)) from None


def _json(files: Mapping[str, bytes], path: str, report: AuditReport) -> dict[str, Any]:
    """The JSON object at ``path``; ``{}`` (and a problem) when it is another JSON value."""
    if path not in files:
        return {}  # already named by the manifest check (or the signature check)
    doc = package_json(files[path], member=path)
    if not isinstance(doc, dict):
        report.problem("not-json", path, "not a JSON object")
        return {}
    return doc


def _objects(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _check_signature(files: Mapping[str, bytes], report: AuditReport, pinned: Any | None) -> bool:
    for name in (MANIFEST, SIGNATURE, SITE_KEY):
        if name not in files:
            report.problem("file-missing", name, f"{name} is missing: nothing can be trusted")
    if any(name not in files for name in (MANIFEST, SIGNATURE, SITE_KEY)):
        return False
    try:
        package_key = load_public_key(files[SITE_KEY])
    except ValueError as exc:
        report.problem("manifest-key-invalid", SITE_KEY, str(exc))
        return False
    report.site_key_fingerprint = key_fingerprint(package_key)
    if pinned is None:
        report.problem(
            "manifest-key-not-pinned",
            SITE_KEY,
            "no trusted site key given (--key) or configured: the package's own key proves "
            "nothing about who signed it",
        )
        key = package_key
    elif key_fingerprint(pinned) != report.site_key_fingerprint:
        report.problem(
            "manifest-key-mismatch",
            SITE_KEY,
            f"the manifest is signed with key {report.site_key_fingerprint[:16]}…, not the "
            f"trusted site key {key_fingerprint(pinned)[:16]}…",
        )
        key = pinned
    else:
        key = pinned
    if not manifest_signature_ok(files[MANIFEST], files[SIGNATURE], key):
        report.problem(
            "manifest-signature-invalid",
            SIGNATURE,
            f"the signature of {MANIFEST} does not verify with key {key_fingerprint(key)[:16]}…",
        )
        return False
    return True


def _check_manifest(files: Mapping[str, bytes], report: AuditReport) -> None:
    listed: dict[str, str] = {}
    for number, line in enumerate(
        files.get(MANIFEST, b"").decode("utf-8", "replace").splitlines(), 1
    ):
        match = _MANIFEST_LINE.match(line)
        if match is None:
            report.problem(
                "manifest-malformed", MANIFEST, f"line {number} is not '<sha256>  <path>'"
            )
            continue
        listed[match.group(2)] = match.group(1)
    for path, digest in sorted(listed.items()):
        if path not in files:
            report.problem("file-missing", path, "listed in the manifest, not in the package")
        elif _sha(files[path]) != digest:
            report.problem(
                "file-altered",
                path,
                f"sha256 {_sha(files[path])[:16]}…, manifest says {digest[:16]}…",
            )
    for path in sorted(set(files) - set(listed) - UNSIGNED_FILES):
        report.problem("file-unlisted", path, "in the package, not in the signed manifest")
    report.files = len(files)


@dataclass(frozen=True)
class _Policy:
    roots: list[TrustRoot]
    issuers: list[str]
    identity_regex: str | None
    extra_policies: Mapping[str, str]
    keys: Mapping[str, str]


def _policy(files: Mapping[str, bytes], report: AuditReport) -> _Policy:
    doc = _json(files, "trust/policy.json", report)
    roots = []
    for entry in _objects(doc.get("trusted_roots")):
        path = str(entry.get("path", ""))
        if path not in files:
            report.problem("file-missing", path, f"trusted root {entry.get('name')!r} is missing")
            continue
        try:
            roots.append(load_trust_root(files[path], name=str(entry.get("name") or path)))
        except (TrustRootError, ValueError) as exc:
            report.problem("trusted-root-invalid", path, str(exc))
    keys = {}
    for entry in _objects(doc.get("keys")):
        path = str(entry.get("path", ""))
        if path in files:
            keys[str(entry.get("fingerprint"))] = files[path].decode("utf-8", "replace")
        else:
            report.problem("file-missing", path, f"registered key {entry.get('name')!r} is missing")
    return _Policy(
        roots=roots,
        issuers=[str(i) for i in doc.get("accepted_issuers") or [] if isinstance(i, str)],
        identity_regex=str(doc["identity_regex"]) if doc.get("identity_regex") else None,
        extra_policies={str(k): str(v) for k, v in dict(doc.get("extra_policies") or {}).items()}
        if isinstance(doc.get("extra_policies"), dict)
        else {},
        keys=keys,
    )


def _ctrf_statuses(summary: SummaryBundle | None) -> dict[str, dict[str, str]]:
    """What the CTRF reports in the bundle say, read as the ingest reads them (a failing
    duplicate wins over a passing one)."""
    if summary is None:
        return {}
    results: dict[str, dict[str, Any]] = {}
    for phase, ctrf in sorted(summary.ctrf.items()):
        checks: dict[str, Any] = {}
        for test in ctrf.tests:
            previous = checks.get(test.name)
            if previous is not None and previous["status"] == "failed":
                continue
            checks[test.name] = {"status": test.status}
        results[phase] = checks
    return package_checks(results)


def _iso(value: Any) -> str:
    return value.isoformat().replace("+00:00", "Z") if value is not None else ""


def _check_record(
    record: Mapping[str, Any],
    files: Mapping[str, bytes],
    policy: _Policy,
    report: AuditReport,
    supported: SupportedRange,
) -> None:
    sha = str(record.get("sha256", ""))
    where = f"records.ndjson#{record.get('id')}"
    bundle_path = f"bundles/{sha}"
    bundle = files.get(bundle_path)
    if bundle is None:
        report.problem("bundle-missing", bundle_path, f"{where}: its bundle is not in the package")
        return
    if _sha(bundle) != sha:
        report.problem(
            "bundle-altered", bundle_path, f"{where}: the bytes' sha256 is not {sha[:16]}…"
        )
    artifact = files.get(str(record.get("artifact"))) if record.get("artifact") else None
    verification = verify_evidence(
        bundle,
        trusted_root=policy.roots,
        issuer=policy.issuers,
        identity_regex=policy.identity_regex,
        extra_policies=policy.extra_policies or None,
        public_keys=policy.keys,
        artifact=artifact,
    )
    if verification.status != "verified" or verification.statement is None:
        failed = verification.transcript.failed_step
        detail = f"{failed.step}: {failed.detail}" if failed else verification.status
        report.problem(
            "bundle-not-verified",
            bundle_path,
            f"{where}: does not verify against the package's roots and keys ({detail[:500]})",
        )
        return
    report.bundles_verified += 1
    statement = verification.statement
    signer = verification.outcome.signer if verification.outcome else None
    proven: dict[str, Any] = {
        "recipe": statement.recipe_name,
        "recipe_digest": statement.recipe_digest,
        "attested_at": _iso(statement.attested_at),
        "aicr_version": statement.aicr_version[:100],
        "validator_catalog_version": statement.validator_catalog_version[:100],
        "predicate_type": statement.predicate_type,
    }
    if signer is not None and signer.mode == "key":
        proven["signer_key_fingerprint"] = signer.key_fingerprint or ""
    elif signer is not None:
        proven["signer_identity"] = signer.identity or ""
        proven["signer_issuer"] = signer.issuer or ""
    if verification.kind == "tarball":
        proven["checks"] = _ctrf_statuses(verification.summary)
    wrong = sorted(name for name, value in proven.items() if record.get(name) != value)
    if "recipe_digest" in wrong:
        report.problem(
            "binding-mismatch",
            where,
            f"the bundle attests recipe digest {statement.recipe_digest[:16]}…, the record says "
            f"{str(record.get('recipe_digest'))[:16]}…",
        )
        wrong.remove("recipe_digest")
    if wrong:
        report.problem(
            "record-mismatch", where, f"fields that differ from what the bundle proves: {wrong}"
        )
    expected_counted = (
        record.get("verdict") == "verified"
        and not record.get("withdrawn")
        and bool(record.get("signer_counted"))
        and not record.get("is_simulated")
        and supported.contains(str(record.get("aicr_version") or ""))
    )
    if bool(record.get("counted")) != expected_counted:
        report.problem(
            "record-inconsistent",
            where,
            "counted must be: verified, not withdrawn, a counted signer, not simulated, in the "
            "package's aicr_supported_range",
        )


def _check_recipes(
    records: Sequence[Mapping[str, Any]], files: Mapping[str, bytes], report: AuditReport
) -> dict[str, Any]:
    index = _json(files, "recipes/index.json", report)
    declared = {}
    for digest in sorted({str(r.get("recipe_digest")) for r in records}):
        path = f"recipes/{digest}.yaml"
        if path not in files:
            report.problem("recipe-missing", path, "the recipe YAML a record binds to is missing")
        elif _sha(files[path]) != digest:
            report.problem(
                "recipe-digest-mismatch",
                path,
                f"sha256 {_sha(files[path])[:16]}… is not the digest",
            )
        else:
            report.recipes_checked += 1
        entry = index.get(digest)
        if not isinstance(entry, dict):
            report.problem("recipe-missing", "recipes/index.json", f"no entry for {digest[:16]}…")
            continue
        declared[digest] = entry.get("checks") or {}
    return declared


def _supported_range(meta: Mapping[str, Any] | None, report: AuditReport) -> SupportedRange:
    """The supported AICR range the package's records were counted under (``package.json``;
    absent in packages from before it existed: any version)."""
    text = (meta or {}).get("aicr_supported_range", "")
    try:
        return parse_supported_range(text if isinstance(text, str) else "")
    except ValueError as exc:
        report.problem("package-json-invalid", "package.json", f"aicr_supported_range: {exc}")
        return SupportedRange()


def audit_verify(path: Path, *, pinned_key: Any | None) -> AuditReport:
    """Check the package at ``path``; ``pinned_key``: the site's public key the auditor trusts
    (``PackageUnreadable`` when it cannot be opened at all)."""
    report = AuditReport(package=str(path))
    files = read_package(path)
    _check_signature(files, report, pinned_key)
    _check_manifest(files, report)
    meta = _json(files, "package.json", report)
    if meta and meta.get("format") != FORMAT:
        report.problem("format-unknown", "package.json", f"format is not {FORMAT!r}")
    records: list[dict[str, Any]] = []
    for number, line in enumerate(files.get("records.ndjson", b"").splitlines(), 1):
        record = package_json(line, member=f"records.ndjson:{number}")
        if not isinstance(record, dict):
            report.problem("not-json", f"records.ndjson:{number}", "not an object")
            continue
        records.append(record)
    report.records = len(records)
    if meta and meta.get("records") != len(records):
        report.problem(
            "record-count-mismatch",
            "records.ndjson",
            f"{len(records)} records, package.json states {meta.get('records')}",
        )
    policy = _policy(files, report)
    supported = _supported_range(meta, report)
    for record in records:
        _check_record(record, files, policy, report, supported)
    declared = _check_recipes(records, files, report)
    stated = _json(files, "consensus.json", report)
    try:
        recomputed = json.loads(json.dumps(package_consensus(records, declared)))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        report.problem(
            "consensus-uncomputable",
            "records.ndjson",
            f"the records lack what consensus needs ({type(exc).__name__}: {str(exc)[:200]})",
        )
        return report
    report.consensus_recipes = len(recomputed)
    for name in sorted(set(stated) | set(recomputed)):
        if stated.get(name) != recomputed.get(name):
            said_entry = stated.get(name)
            said = said_entry.get("state", "?") if isinstance(said_entry, dict) else "absent"
            found = (recomputed.get(name) or {}).get("state", "absent")
            report.problem(
                "consensus-mismatch",
                "consensus.json",
                f"{name}: the package states {said}, the records give {found}",
            )
    return report
