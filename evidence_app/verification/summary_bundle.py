"""Read an AICR evidence directory (``summary-bundle/``) packed as tar or tar.gz, in memory, and
check every file against ``manifest.json`` and the (signed) predicate.

Archive safety: nothing is extracted to disk; the input, the decompressed stream, each member,
the number of members and the total are capped (a gzip or tar bomb is refused before its data
is read); only regular files and directories are allowed (no symlinks, hard links, devices or
FIFOs); member paths must be relative, without ``..``, backslashes or NULs, and unique.

Layout: exactly one ``manifest.json`` marks the bundle root (``summary-bundle/`` or the archive
top). In the root: the files ``manifest.json`` lists, plus ``manifest.json``,
``statement.intoto.json`` (unsigned statement) and ``attestation.intoto.jsonl`` (the signed
Sigstore bundle, when signed). Beside the root only ``pointer.yaml`` may appear. Anything else
is an error naming the file.

Checks (``check_summary_files``): every manifest entry exists with its size and sha256; no
unlisted file; ``predicate.manifest.digest`` = sha256(manifest.json) and ``fileCount``;
``predicate.phases[p].ctrfDigest`` = sha256(``ctrf/<p>.json``) and the phase counts agree with
the report; ``predicate.bom.digest`` = sha256(``bom.cdx.json``). When a verified statement is
given, ``statement.intoto.json`` (if present) must say the same thing.

``predicate.recipe.digest`` must be ``recipe.yaml``'s digest under the predicate type's scheme
(``digests.scheme_for``) for a v3 statement and for any statement whose subject is an OCI
artifact: there the subject does not name the recipe, so the bundled recipe.yaml is what ties
the predicate's recipe identity to content. A v1/v2 ``recipe:<name>`` statement signs the
legacy digest as its subject and is bound by it, as before (its recipe.yaml is not re-hashed).
"""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from ._json import JSONLimitError, JSONLimits, load_json
from .ctrf import CtrfError, CtrfReport, parse_ctrf
from .digests import DigestScheme, RecipeDigests, RecipeYamlError, recipe_yaml_digests, scheme_for
from .statement import AicrStatement, PhaseSummary, StatementError, parse_statement
from .tarscan import TarHeaderError, check_tar_headers

MAX_ARCHIVE_BYTES = 32 * 1024 * 1024
MAX_UNPACKED_BYTES = 64 * 1024 * 1024
MAX_MEMBER_BYTES = 16 * 1024 * 1024
MAX_MEMBERS = 256
MAX_PATH_CHARS = 512
MAX_PATH_DEPTH = 8

MANIFEST = "manifest.json"
STATEMENT = "statement.intoto.json"
ATTESTATION = "attestation.intoto.jsonl"
RECIPE = "recipe.yaml"
SNAPSHOT = "snapshot.yaml"
BOM = "bom.cdx.json"
POINTER = "pointer.yaml"
_META_FILES = frozenset({MANIFEST, STATEMENT, ATTESTATION})
_MANIFEST_LIMITS = JSONLimits(max_bytes=1_000_000, max_depth=8, max_object_keys=64)
_HEX64 = re.compile(r"[0-9a-f]{64}")
_CTRF_PATH = re.compile(r"ctrf/([a-z][a-z0-9-]{0,31})\.json")


class SummaryBundleError(ValueError):
    """The archive or one of its files is unacceptable; ``file`` names it when known."""

    def __init__(self, message: str, *, file: str | None = None) -> None:
        super().__init__(f"{file}: {message}" if file else message)
        self.file = file
        self.message = message


@dataclass(frozen=True)
class ManifestEntry:
    path: str
    size: int
    sha256: str  # hex
    media_type: str | None


@dataclass(frozen=True)
class SummaryArchive:
    """The safely read archive: bundle-root-relative files, not yet checked."""

    root: str
    files: Mapping[str, bytes]
    pointer_yaml: bytes | None = None

    @property
    def signed_bundle(self) -> bytes | None:
        """The Sigstore bundle from ``attestation.intoto.jsonl`` (one JSON line)."""
        data = self.files.get(ATTESTATION)
        if data is None:
            return None
        lines = [line for line in data.splitlines() if line.strip()]
        if len(lines) != 1:
            raise SummaryBundleError(
                f"expected exactly one signed bundle line, found {len(lines)}", file=ATTESTATION
            )
        return lines[0].strip()

    @property
    def statement_bytes(self) -> bytes | None:
        return self.files.get(STATEMENT)


@dataclass(frozen=True)
class SummaryBundle:
    root: str
    files: Mapping[str, bytes] = field(repr=False)
    manifest: tuple[ManifestEntry, ...]
    manifest_sha256: str
    statement: AicrStatement
    statement_bytes: bytes | None = field(repr=False)
    signed_bundle: bytes | None = field(repr=False)
    recipe_yaml: bytes = field(repr=False)
    recipe_yaml_sha256: str
    snapshot_yaml: bytes | None = field(repr=False)
    bom: bytes | None = field(repr=False)
    ctrf: Mapping[str, CtrfReport]
    pointer_yaml: bytes | None = field(default=None, repr=False)
    # Both digests of recipe.yaml, when it was checked against the predicate (see the module
    # docstring); None for a v1/v2 ``recipe:<name>`` statement.
    recipe_digests: RecipeDigests | None = None

    @property
    def recipe_yaml_matches_digest(self) -> bool:
        """sha256(recipe.yaml) = predicate recipe digest (true for AICR's canonical form of a
        legacy-digest record; a V3 record's digest leaves metadata.version out)."""
        return self.recipe_yaml_sha256 == self.statement.recipe_digest


# --------------------------------------------------------------------------------------------
# archive


def _gunzip(data: bytes, limit: int) -> bytes:
    out = bytearray()
    buf = data
    while True:
        d = zlib.decompressobj(wbits=31)
        while buf:
            try:
                out += d.decompress(buf, limit + 1 - len(out))
            except zlib.error as exc:
                raise SummaryBundleError(f"corrupt gzip stream ({exc})") from None
            if len(out) > limit:
                raise SummaryBundleError(
                    f"decompresses to more than {limit} bytes (compression bomb?)"
                )
            if d.eof:
                break
            buf = d.unconsumed_tail
            if not buf:
                break
        if not d.eof:
            raise SummaryBundleError("truncated gzip stream")
        buf = d.unused_data.lstrip(b"\0")
        if not buf:
            return bytes(out)


def _member_path(name: str) -> str:
    if "\x00" in name or "\\" in name:
        raise SummaryBundleError("member names must not contain NUL or backslash", file=name[:200])
    if name.startswith("/") or re.match(r"[A-Za-z]:", name):
        raise SummaryBundleError("absolute paths are not allowed", file=name[:200])
    if len(name) > MAX_PATH_CHARS:
        raise SummaryBundleError("path too long", file=name[:200])
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise SummaryBundleError("'..' in a member path is not allowed", file=name[:200])
    if len(parts) > MAX_PATH_DEPTH:
        raise SummaryBundleError("path nested too deeply", file=name[:200])
    return "/".join(parts)


def read_archive(
    data: bytes,
    *,
    max_archive_bytes: int = MAX_ARCHIVE_BYTES,
    max_unpacked_bytes: int = MAX_UNPACKED_BYTES,
    max_member_bytes: int = MAX_MEMBER_BYTES,
    max_members: int = MAX_MEMBERS,
) -> dict[str, bytes]:
    """Read a tar / tar.gz archive into ``{path: bytes}`` (regular files only), safely."""
    if len(data) > max_archive_bytes:
        raise SummaryBundleError(f"archive of {len(data)} bytes exceeds {max_archive_bytes}")
    raw = _gunzip(data, max_unpacked_bytes) if data[:2] == b"\x1f\x8b" else bytes(data)
    if len(raw) > max_unpacked_bytes:
        raise SummaryBundleError(f"archive of {len(raw)} bytes exceeds {max_unpacked_bytes}")
    if len(raw) < 512 or raw[257:262] != b"ustar":
        raise SummaryBundleError("not a tar or tar.gz archive")
    try:
        check_tar_headers(
            io.BytesIO(raw),
            max_member_bytes=max_member_bytes,
            max_total_bytes=max_unpacked_bytes,
            max_members=max_members,
        )
    except TarHeaderError as exc:
        raise SummaryBundleError(exc.message, file=exc.member or None) from None
    files: dict[str, bytes] = {}
    total = 0
    members = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tar:
            while True:
                member = tar.next()
                if member is None:
                    break
                members += 1
                if members > max_members:
                    raise SummaryBundleError(f"more than {max_members} archive members")
                path = _member_path(member.name)
                shown = path or member.name[:200]
                if member.isdir():
                    continue
                if member.issym() or member.islnk():
                    raise SummaryBundleError("links are not allowed in the archive", file=shown)
                if not member.isreg():
                    raise SummaryBundleError(
                        "only regular files and directories are allowed (device, FIFO or "
                        "other special member)",
                        file=shown,
                    )
                if not path:
                    raise SummaryBundleError("empty member name", file=member.name[:200])
                if member.size > max_member_bytes:
                    raise SummaryBundleError(
                        f"declares {member.size} bytes (limit {max_member_bytes})", file=path
                    )
                total += member.size
                if total > max_unpacked_bytes:
                    raise SummaryBundleError(
                        f"archive members total more than {max_unpacked_bytes} bytes"
                    )
                if path in files:
                    raise SummaryBundleError("appears twice in the archive", file=path)
                handle = tar.extractfile(member)
                content = handle.read(member.size) if handle is not None else b""
                if len(content) != member.size:
                    raise SummaryBundleError("truncated archive member", file=path)
                files[path] = content
    except SummaryBundleError:
        raise
    except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
        raise SummaryBundleError(f"unreadable tar archive ({type(exc).__name__}: {exc})") from None
    return files


def open_summary_bundle(data: bytes) -> SummaryArchive:
    """Read the archive and locate the bundle root (``manifest.json``)."""
    return locate_summary_files(read_archive(data))


def locate_summary_files(all_files: Mapping[str, bytes]) -> SummaryArchive:
    """Find the bundle root among archive-relative ``all_files`` and re-key files to it."""
    manifests = [p for p in all_files if p == MANIFEST or p.endswith("/" + MANIFEST)]
    if not manifests:
        raise SummaryBundleError("no manifest.json in the archive")
    if len(manifests) > 1:
        raise SummaryBundleError(
            f"{len(manifests)} manifest.json files in the archive", file=manifests[1]
        )
    root = manifests[0][: -len(MANIFEST)]
    parent = root.rstrip("/").rpartition("/")[0] if root else None
    pointer_path = f"{parent}/{POINTER}" if parent else POINTER
    files: dict[str, bytes] = {}
    pointer = None
    for path, content in all_files.items():
        if root and not path.startswith(root):
            if root and path == pointer_path:
                pointer = content
                continue
            raise SummaryBundleError("unexpected file outside the summary bundle", file=path)
        files[path[len(root) :]] = content
    return SummaryArchive(root=root, files=MappingProxyType(files), pointer_yaml=pointer)


# --------------------------------------------------------------------------------------------
# checks


def parse_manifest(data: bytes) -> tuple[ManifestEntry, ...]:
    try:
        doc = load_json(data, what=MANIFEST, limits=_MANIFEST_LIMITS)
    except JSONLimitError as exc:
        raise SummaryBundleError(str(exc)) from None
    if not isinstance(doc, dict):
        raise SummaryBundleError("expected a JSON object", file=MANIFEST)
    version = doc.get("schemaVersion")
    if not isinstance(version, str) or not re.fullmatch(r"1\.\d+\.\d+", version):
        raise SummaryBundleError(f"unsupported schemaVersion {str(version)[:20]!r}", file=MANIFEST)
    items = doc.get("files")
    if not isinstance(items, list) or len(items) > MAX_MEMBERS:
        raise SummaryBundleError(f"files: expected a list of at most {MAX_MEMBERS}", file=MANIFEST)
    entries: list[ManifestEntry] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        where = f"files[{i}]"
        if not isinstance(item, dict):
            raise SummaryBundleError(f"{where}: expected an object", file=MANIFEST)
        path = item.get("path")
        if not isinstance(path, str) or not path:
            raise SummaryBundleError(f"{where}.path: expected a string", file=MANIFEST)
        try:
            normal = _member_path(path)
        except SummaryBundleError as exc:
            raise SummaryBundleError(
                f"{where}.path {path[:100]!r}: {exc.message}", file=MANIFEST
            ) from None
        if normal != path:
            raise SummaryBundleError(
                f"{where}.path {path[:100]!r} is not normalised", file=MANIFEST
            )
        if path in _META_FILES:
            raise SummaryBundleError(f"{where}.path: {path} cannot be listed", file=MANIFEST)
        if path in seen:
            raise SummaryBundleError(f"{where}.path: {path} listed twice", file=MANIFEST)
        seen.add(path)
        size = item.get("size")
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise SummaryBundleError(
                f"{where}.size: expected a non-negative integer", file=MANIFEST
            )
        digest = item.get("sha256")
        if (
            not isinstance(digest, str)
            or not digest.startswith("sha256:")
            or not _HEX64.fullmatch(digest[7:].lower())
        ):
            raise SummaryBundleError(f"{where}.sha256: expected 'sha256:<64 hex>'", file=MANIFEST)
        media_type = item.get("mediaType")
        if media_type is not None and (not isinstance(media_type, str) or len(media_type) > 256):
            raise SummaryBundleError(f"{where}.mediaType: expected a string", file=MANIFEST)
        entries.append(
            ManifestEntry(path=path, size=size, sha256=digest[7:].lower(), media_type=media_type)
        )
    return tuple(entries)


def _same_statement(unsigned: object, statement: AicrStatement) -> bool:
    """The unsigned statement file says what the signed statement says.

    A statement signed over an OCI artifact cannot be inside that artifact (its digest is the
    artifact's): ``aicr evidence publish`` pushes the directory with the unsigned statement it
    was emitted with, subject ``recipe:<name>``, and signs a copy naming the artifact
    afterwards (AICR ``pkg/evidence/attestation/emit.go`` ``signAndPush``; its verifier exempts
    the file from the inventory, ``verifier/inventory.go``). That file must then carry the
    same predicate with the recipe as its subject."""
    if not isinstance(unsigned, dict):
        return False
    subjects = unsigned.get("subject")
    if not isinstance(subjects, list) or len(subjects) != 1 or not isinstance(subjects[0], dict):
        return False
    digest = subjects[0].get("digest")
    name, sha256 = statement.subject.name, statement.subject.sha256
    if statement.artifact_subject:
        name, sha256 = f"recipe:{statement.recipe_name}", statement.recipe_digest
    return (
        unsigned.get("predicateType") == statement.predicate_type
        and unsigned.get("predicate") == dict(statement.predicate)
        and subjects[0].get("name") == name
        and isinstance(digest, dict)
        and str(digest.get("sha256", "")).lower() == sha256
    )


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check_summary_files(
    archive: SummaryArchive | Mapping[str, bytes],
    *,
    statement: AicrStatement | None = None,
) -> SummaryBundle:
    """Check the bundle's files against ``manifest.json`` and the predicate.

    ``statement``: the verified statement (from the signed DSSE payload). Without it, the
    unsigned ``statement.intoto.json`` is parsed and used — self-consistency only.
    """
    if not isinstance(archive, SummaryArchive):
        archive = SummaryArchive(root="", files=MappingProxyType(dict(archive)))
    files = archive.files
    manifest_bytes = files.get(MANIFEST)
    if manifest_bytes is None:
        raise SummaryBundleError("missing", file=MANIFEST)
    entries = parse_manifest(manifest_bytes)
    statement = _statement_of(files, statement)
    signed_bundle = archive.signed_bundle
    listed = {e.path: e for e in entries}
    _check_listed_files(files, entries)
    manifest_sha256 = _check_manifest_binding(statement, manifest_bytes, entries)
    if RECIPE not in listed:
        raise SummaryBundleError("missing from the bundle", file=RECIPE)
    recipe_yaml = files[RECIPE]
    recipe_digests = _check_recipe_identity(recipe_yaml, statement)
    ctrf = _ctrf_reports(files, listed, statement)
    bom = files.get(BOM) if BOM in listed else None
    if statement.bom is not None:
        if bom is None:
            raise SummaryBundleError("missing (predicate.bom names it)", file=BOM)
        if statement.bom.digest != f"sha256:{_sha256(bom)}":
            raise SummaryBundleError("sha256 differs from predicate.bom.digest", file=BOM)
    return SummaryBundle(
        root=archive.root,
        files=files,
        manifest=entries,
        manifest_sha256=manifest_sha256,
        statement=statement,
        statement_bytes=files.get(STATEMENT),
        signed_bundle=signed_bundle,
        recipe_yaml=recipe_yaml,
        recipe_yaml_sha256=_sha256(recipe_yaml),
        snapshot_yaml=files.get(SNAPSHOT) if SNAPSHOT in listed else None,
        bom=bom,
        ctrf=MappingProxyType(ctrf),
        pointer_yaml=archive.pointer_yaml,
        recipe_digests=recipe_digests,
    )


def _check_recipe_identity(recipe_yaml: bytes, statement: AicrStatement) -> RecipeDigests | None:
    """``predicate.recipe.digest`` against recipe.yaml under the predicate's digest scheme,
    where the module docstring says it is required; the digests, or None where it is not."""
    scheme = scheme_for(statement.predicate_type)
    if scheme is not DigestScheme.V3 and not statement.artifact_subject:
        return None
    try:
        digests = recipe_yaml_digests(recipe_yaml, path=RECIPE)
    except RecipeYamlError as exc:
        raise SummaryBundleError(
            f"cannot compute the recipe digest predicate.recipe is checked with: {exc}",
            file=RECIPE,
        ) from None
    expected = digests.under(scheme)
    if statement.recipe_digest == expected:
        return digests
    hint = ""
    if scheme is DigestScheme.V3 and statement.recipe_digest == digests.legacy:
        hint = (
            " (it is the file's legacy digest: a recipe-evidence/v3 statement carries the V3 "
            "digest, which leaves metadata.version out)"
        )
    raise SummaryBundleError(
        f"its {scheme.label} sha256:{expected[:12]}… differs from predicate.recipe.digest "
        f"sha256:{statement.recipe_digest[:12]}…{hint}",
        file=RECIPE,
    )


def _statement_of(files: Mapping[str, bytes], signed: AicrStatement | None) -> AicrStatement:
    """The signed statement, which an unsigned ``statement.intoto.json`` must repeat; or,
    with none signed, that unsigned file parsed."""
    statement_bytes = files.get(STATEMENT)
    if signed is None:
        if statement_bytes is None:
            raise SummaryBundleError("missing (and no signed statement was given)", file=STATEMENT)
        try:
            return parse_statement(statement_bytes)
        except StatementError as exc:
            raise SummaryBundleError(str(exc), file=STATEMENT) from None
    if statement_bytes is not None:
        try:
            unsigned = load_json(statement_bytes, what=STATEMENT)
        except JSONLimitError as exc:
            raise SummaryBundleError(str(exc)) from None
        if not _same_statement(unsigned, signed):
            raise SummaryBundleError("differs from the signed statement", file=STATEMENT)
    return signed


def _check_listed_files(files: Mapping[str, bytes], entries: tuple[ManifestEntry, ...]) -> None:
    """Every listed file present with its size and sha256; no file the manifest leaves out."""
    listed = {e.path for e in entries}
    for entry in entries:
        content = files.get(entry.path)
        if content is None:
            raise SummaryBundleError("listed in manifest.json but missing", file=entry.path)
        if len(content) != entry.size:
            raise SummaryBundleError(
                f"size {len(content)} differs from manifest.json ({entry.size})", file=entry.path
            )
        if _sha256(content) != entry.sha256:
            raise SummaryBundleError("sha256 differs from manifest.json", file=entry.path)
    for path in sorted(files):
        if path not in listed and path not in _META_FILES:
            raise SummaryBundleError("not listed in manifest.json", file=path)


def _check_manifest_binding(
    statement: AicrStatement, manifest_bytes: bytes, entries: tuple[ManifestEntry, ...]
) -> str:
    """The manifest's sha256, once the predicate's manifest digest and file count match it
    (which binds every listed file to the signature)."""
    manifest_sha256 = _sha256(manifest_bytes)
    if statement.manifest is None:
        raise SummaryBundleError(
            "the predicate has no manifest digest, so the files are not bound to the signature",
            file=MANIFEST,
        )
    if statement.manifest.digest != f"sha256:{manifest_sha256}":
        raise SummaryBundleError("sha256 differs from predicate.manifest.digest", file=MANIFEST)
    if statement.manifest.file_count != len(entries):
        raise SummaryBundleError(
            f"lists {len(entries)} files, predicate.manifest.fileCount says "
            f"{statement.manifest.file_count}",
            file=MANIFEST,
        )
    return manifest_sha256


def _ctrf_reports(
    files: Mapping[str, bytes], listed: Mapping[str, ManifestEntry], statement: AicrStatement
) -> dict[str, CtrfReport]:
    """One CTRF report per predicate phase, each matching the phase's digest and counts; no
    report for a phase the predicate does not name."""
    for path in listed:
        m = _CTRF_PATH.fullmatch(path)
        if path.startswith("ctrf/") and not m:
            raise SummaryBundleError("unexpected file name under ctrf/", file=path)
        if m and m.group(1) not in statement.phases:
            raise SummaryBundleError(f"phase {m.group(1)!r} is not in the predicate", file=path)
    ctrf: dict[str, CtrfReport] = {}
    for phase, summary in statement.phases.items():
        path = f"ctrf/{phase}.json"
        if path not in listed:
            raise SummaryBundleError(f"missing (predicate phase {phase!r})", file=path)
        ctrf[phase] = _ctrf_report(files[path], path=path, phase=phase, summary=summary)
    return ctrf


def _ctrf_report(content: bytes, *, path: str, phase: str, summary: PhaseSummary) -> CtrfReport:
    if summary.ctrf_digest != f"sha256:{_sha256(content)}":
        raise SummaryBundleError(
            f"sha256 differs from predicate.phases.{phase}.ctrfDigest", file=path
        )
    try:
        report = parse_ctrf(content, file=path, phase=phase)
    except CtrfError as exc:
        raise SummaryBundleError(str(exc).removeprefix(f"{path}: "), file=path) from None
    counts = report.counts()
    if (counts["passed"], counts["skipped"]) != (summary.passed, summary.skipped) or (
        summary.failed not in (counts["failed"], counts["failed"] + counts["other"])
    ):
        raise SummaryBundleError(
            f"test counts (passed {counts['passed']}, failed {counts['failed']}, other "
            f"{counts['other']}, skipped {counts['skipped']}) differ from "
            f"predicate.phases.{phase} (passed {summary.passed}, failed {summary.failed}, "
            f"skipped {summary.skipped})",
            file=path,
        )
    return report


def read_summary_bundle(data: bytes, *, statement: AicrStatement | None = None) -> SummaryBundle:
    """``open_summary_bundle`` + ``check_summary_files`` in one call."""
    return check_summary_files(open_summary_bundle(data), statement=statement)
