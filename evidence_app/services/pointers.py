"""Taking in AICR's committed evidence index (pointer files) and publishing back to it.

``pointer_import`` walks ``recipes/evidence/`` of an AICR tree and records one
``EvidencePointer`` per file, checked against the pointer contract (``evidence_app.pointers``)
and the tree's own ``allowlist.yaml``. A pointer is never evidence: it only names a bundle. A
pointer that passes the contract is *pending* until its bundle was pulled by digest through the
site's one OCI path (``services.oci.oci_upload_request`` → ``tasks.ingest_oci`` →
``evidence_ingest``, verify before count) and the verified signer was compared with the one
the pointer claims.

One outbound policy: the OCI upload path's. A pointer's registry is contacted only when this
site pulls OCI references at all (``EVIDENCE_OCI_ENABLED``, an ingest worker) *and* the
registry is listed in ``EVIDENCE_OCI_ALLOWED_REGISTRIES`` (an empty list lets a user's own
upload reach any public registry, but never makes a tree of pointers pull by itself); the pull
then goes through ``services.oci.registry_permitted`` and its address checks like any upload.
Otherwise the pointer stays pending with the reason ``registry <host> not allowed on this
site`` and nothing is contacted.

The pull verifies pinned to the claimed signer (``services.oci`` passes the pointer's issuer
and identity as ``evidence_ingest``'s ``expected_signer``, as AICR's ingest pins
``--expected-issuer/--expected-identity-regexp``), so a bundle signed by anyone else fails its
``signature`` step and nothing is stored. ``_settle`` checks the stored record against the
pointer once more (a record that already existed, e.g. uploaded directly, is linked only when
its signer and recipe are the pointer's); should a record this pull created still contradict
it, the record is withdrawn.

Retries: pending pointers carry ``next_try`` (exponential backoff from
``EVIDENCE_POINTER_RETRY_BASE_SECONDS``, capped at ``EVIDENCE_POINTER_RETRY_MAX_SECONDS``); the
beat task ``tasks.pointers_retry`` re-checks the registry policy each time.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from evidence_app import pointers as pc
from evidence_app.corroborate import allowlist as al
from evidence_app.corroborate.errors import AllowlistError, CorroborateError
from evidence_app.corroborate.files import read_bounded_file
from evidence_app.models import (
    Evidence,
    EvidencePointer,
    PointerState,
    Role,
    SignerKind,
    UploadState,
    Verdict,
    counted_q,
)
from evidence_app.services import oci
from evidence_app.services.withdrawal import WithdrawalError, evidence_withdraw

logger = logging.getLogger(__name__)

EVIDENCE_PREFIX = "recipes/evidence/"
ALLOWLIST_NAME = "allowlist.yaml"
MAX_POINTER_FILES = 10_000
MAX_DEPTH = 3  # <recipe>/<src>/<file>
RETRY_BATCH = 100
_HEX40 = re.compile(r"[0-9a-f]{40}")
_REF_NAME = re.compile(r"refs/[A-Za-z0-9._/-]{1,200}")


class PointerImportError(Exception):
    """The tree as a whole cannot be imported (no evidence folder, an invalid allowlist)."""


# --- the tree ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EvidenceTree:
    evidence_dir: Path
    allowlist_body: bytes | None
    commit: str


def tree_locate(path: Path) -> EvidenceTree:
    """``path`` is an AICR checkout, its ``recipes/`` folder or its ``recipes/evidence/``."""
    path = Path(path)
    candidates = [path / "recipes" / "evidence", path / "evidence", path]
    evidence_dir = next(
        (c for c in candidates if c.is_dir() and not c.is_symlink() and c.name == "evidence"),
        None,
    )
    if evidence_dir is None:
        raise PointerImportError(
            f"{path}: no recipes/evidence/ folder (give an AICR checkout, its recipes/ folder "
            "or its recipes/evidence/ folder)"
        )
    allowlist_file = evidence_dir / ALLOWLIST_NAME
    body = None
    if allowlist_file.is_file() and not allowlist_file.is_symlink():
        try:
            body = read_bounded_file(allowlist_file, al.MAX_ALLOWLIST_BYTES)
        except CorroborateError as exc:
            raise PointerImportError(f"{allowlist_file}: {exc}") from None
    return EvidenceTree(
        evidence_dir=evidence_dir,
        allowlist_body=body,
        commit=tree_commit(evidence_dir.parent.parent),
    )


def _small_text(path: Path) -> str:
    try:
        return read_bounded_file(path, 4096).decode("ascii").strip()
    except (CorroborateError, UnicodeDecodeError, OSError):
        return ""


def tree_commit(root: Path) -> str:
    """The commit a checkout's ``.git/HEAD`` names (40 hex), else "" — read, never run git."""
    git = root / ".git"
    if not git.is_dir() or git.is_symlink():
        return ""  # a worktree's .git file, or no checkout: unknown
    head = _small_text(git / "HEAD")
    if _HEX40.fullmatch(head):
        return head
    ref = head.removeprefix("ref: ").strip()
    if not _REF_NAME.fullmatch(ref) or ".." in ref:
        return ""
    loose = git / ref
    if loose.is_file() and not loose.is_symlink():
        value = _small_text(loose)
        return value if _HEX40.fullmatch(value) else ""
    try:
        packed = read_bounded_file(git / "packed-refs", 4 << 20).decode("ascii", "replace")
    except (CorroborateError, OSError):
        return ""
    for line in packed.splitlines():
        sha, _, name = line.partition(" ")
        if name == ref and _HEX40.fullmatch(sha):
            return sha
    return ""


def pointer_files(evidence_dir: Path) -> Iterator[tuple[str, Path]]:
    """``(path relative to recipes/evidence/, file)`` for every ``*.yaml`` but the allowlist;
    symbolic links are not followed, the depth and the count are bounded."""
    count = 0
    for directory, dirs, files in os.walk(evidence_dir, followlinks=False):
        rel_dir = Path(directory).relative_to(evidence_dir)
        depth = len(rel_dir.parts)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and depth < MAX_DEPTH - 1)
        for name in sorted(files):
            full = Path(directory) / name
            if not name.endswith(".yaml") or full.is_symlink():
                continue
            rel = (rel_dir / name).as_posix()
            if rel == ALLOWLIST_NAME:
                continue
            count += 1
            if count > MAX_POINTER_FILES:
                raise PointerImportError(f"more than {MAX_POINTER_FILES} pointer files")
            yield rel, full


# --- the registry policy -------------------------------------------------------------------------


def registry_refusal(pinned_ref: str) -> str | None:
    """Why this site will not contact the registry of ``pinned_ref`` for a pointer (module
    docstring: the OCI path's one policy, plus an explicit listing); None when it may."""
    registry = pc.registry_of(pinned_ref)
    not_allowed = f"registry {registry or '(none)'} not allowed on this site"
    listed = [r.lower() for r in getattr(settings, "EVIDENCE_OCI_ALLOWED_REGISTRIES", [])]
    try:
        ref = oci.parse_oci_ref(pinned_ref)
    except oci.OciError as exc:
        return exc.message
    if not getattr(settings, "EVIDENCE_OCI_ENABLED", False):
        return not_allowed
    if ref.registry not in listed and ref.host not in listed:
        return not_allowed
    try:
        oci.registry_permitted(ref)
    except oci.OciError as exc:
        return exc.message
    return None


def retry_delay(tries: int) -> timedelta:
    base = float(getattr(settings, "EVIDENCE_POINTER_RETRY_BASE_SECONDS", 300))
    cap = float(getattr(settings, "EVIDENCE_POINTER_RETRY_MAX_SECONDS", 24 * 60 * 60))
    return timedelta(seconds=min(base * (2 ** max(tries - 1, 0)), cap))


# --- recording one pointer -----------------------------------------------------------------------


def _is_flat(path: str) -> bool:
    return path.count("/") == EVIDENCE_PREFIX.count("/")


def _guess_recipe(rel: str) -> str:
    first = rel.split("/", 1)[0]
    return first.removesuffix(".yaml")[:200]


@transaction.atomic
def pointer_record(
    *,
    rel_path: str,
    body: bytes,
    tree_allowlist: al.Allowlist | None,
    allowlist_sha256: str,
    commit: str,
    now: datetime,
    read_error: str = "",
) -> tuple[EvidencePointer, str]:
    """Create or refresh the row of one pointer file; ``(row, "created"|"updated"|"unchanged")``.

    Unchanged bytes checked against the same tree allowlist are left alone (importing a tree
    twice changes nothing); an ingested pointer keeps its evidence while its bytes stay the same.
    """
    path = EVIDENCE_PREFIX + rel_path
    digest = hashlib.sha256(body).hexdigest()
    # Race: two imports of the same tree; the row lock (or the unique path) orders them.
    row = EvidencePointer.objects.select_for_update().filter(path=path).first()
    if (
        row is not None
        and row.content_sha256 == digest
        and (row.state == PointerState.INGESTED or row.allowlist_sha256 == allowlist_sha256)
    ):
        return row, "unchanged"
    outcome = "created" if row is None else "updated"
    row = row or EvidencePointer(path=path)
    row.content_sha256 = digest
    row.allowlist_sha256 = allowlist_sha256
    row.tree_commit = commit
    row.evidence = None
    row.upload = None
    row.tries = 0
    row.last_tried = None
    row.next_try = None
    try:
        if read_error:
            raise pc.PointerError(read_error)
        pointer = pc.parse_pointer(body, path=path)
    except pc.PointerError as exc:
        _blank(row)
        row.recipe = _guess_recipe(rel_path)
        row.state = PointerState.REFUSED
        row.reason = str(exc)[:1000]
        row.save()
        return row, outcome
    _fill(row, pointer)
    result = pc.check_pointer(pointer, rel_path=rel_path, allowlist=tree_allowlist)
    row.claimed_class = result.claimed_class
    if result.problems:
        row.state = PointerState.REFUSED
        row.reason = "; ".join(result.problems)[:1000]
    elif result.layout == pc.FLAT:
        row.state = PointerState.PENDING
        row.reason = (
            "flat pointer: recipes/evidence/<recipe>.yaml is an unsigned pending pointer; "
            "only a signed one at <recipe>/<src>/sha256-<digest>.yaml is pulled"
        )
    else:
        row.state = PointerState.PENDING
        row.reason = ""
        row.next_try = now  # due at once: pointer_try decides what that means
    row.save()
    return row, outcome


def _blank(row: EvidencePointer) -> None:
    row.profile = row.signer_identity = row.signer_issuer = row.source = ""
    row.claimed_class = row.predicate_type = row.oci = row.bundle_digest = ""
    row.rekor_log_index = None
    row.attested_at = None


def _fill(row: EvidencePointer, pointer: pc.Pointer) -> None:
    _blank(row)
    row.recipe = pointer.recipe
    row.profile = pointer.profile
    row.predicate_type = pointer.predicate_type[:200]
    row.oci = pointer.oci[:500]
    row.bundle_digest = pointer.pinned_digest
    row.attested_at = pointer.attested_at
    if pointer.signer is not None:
        row.signer_identity = pointer.signer.identity[:4000]
        row.signer_issuer = pointer.signer.issuer[:1000]
        row.rekor_log_index = pointer.signer.rekor_log_index
        row.source = pointer.signer.slug


def _pinned(row: EvidencePointer) -> str:
    if "@" in row.oci:
        return row.oci
    return f"{row.oci}@{row.bundle_digest}" if row.bundle_digest else row.oci


# --- trying and settling -------------------------------------------------------------------------


def pointer_try(*, pointer_id: int, now: datetime | None = None) -> EvidencePointer | None:
    """One try of a due pending pointer: re-check the registry policy, then enqueue the
    digest-pinned pull (after commit). Returns the row, None when it is not due any more."""
    now = now or timezone.now()
    with transaction.atomic():
        # Race: two beat runs (or an import and a beat run) trying the same pointer; the row
        # lock and the re-checked due time let only the first one through.
        row = (
            EvidencePointer.objects.select_for_update()
            .filter(pk=pointer_id, state=PointerState.PENDING, next_try__lte=now)
            .first()
        )
        if row is None or _is_flat(row.path):
            return row
        if row.upload_id is not None and row.upload and row.upload.state != UploadState.DONE:
            return row  # a pull is in flight; _settle takes it from here
        row.tries += 1
        row.last_tried = now
        row.next_try = now + retry_delay(row.tries)
        row.upload = None
        pinned = _pinned(row)
        refusal = registry_refusal(pinned)
        if refusal is not None:
            row.reason = refusal[:1000]
            row.save()
            return row
        log = oci.oci_upload_request(oci_ref=pinned, user=None)
        if log.state == UploadState.DONE:
            row.reason = f"OCI pull refused: {log.reason}"[:1000]
        else:
            row.upload = log
            row.reason = (
                f"pull queued (upload #{log.pk}); the signer is compared with the pointer's "
                "after ingest"
            )
        row.save()
        return row


def _signer_mismatch(row: EvidencePointer, evidence: Evidence) -> str:
    signer = evidence.signer
    if signer.kind != SignerKind.KEYLESS:
        return (
            f"the bundle is signed with registered key {signer.label!r}, the pointer claims "
            f"{row.signer_identity} via {row.signer_issuer}"
        )
    if (signer.issuer, signer.identity) != (row.signer_issuer, row.signer_identity):
        return (
            f"the bundle is signed by {signer.identity} via {signer.issuer}, the pointer claims "
            f"{row.signer_identity} via {row.signer_issuer}"
        )
    return ""


def _settle(row: EvidencePointer) -> None:
    """Turn a finished pull into the pointer's state (inside the caller's atomic, row locked)."""
    log = row.upload
    if log is None or log.state != UploadState.DONE:
        return
    evidence = log.evidence
    if evidence is None:
        if log.verdict in (Verdict.INVALID, Verdict.UNSUPPORTED):
            row.state = PointerState.REFUSED
            row.next_try = None
            row.reason = f"bundle failed verification: {log.reason}"[:1000]
        else:
            row.upload = None
            row.reason = f"pull failed, retried later: {log.reason}"[:1000]
        row.save()
        return
    problem = _signer_mismatch(row, evidence)
    if not problem and evidence.recipe_name != row.recipe:
        problem = f"recipe differs: the bundle is for {evidence.recipe_name}, not {row.recipe}"
    elif problem:
        problem = f"signer differs: {problem}"
    row.evidence = evidence
    row.next_try = None
    if problem:
        row.state = PointerState.REFUSED
        row.reason = f"refused: {problem}"[:1000]
        if log.created and evidence.withdrawn_at is None:
            # This pull brought the record in on the pointer's word alone: take it back out.
            try:
                evidence_withdraw(
                    evidence=evidence,
                    by=None,
                    roles={Role.MAINTAINER},
                    reason=f"pulled for pointer {row.path}, which it contradicts: {problem}",
                )
            except WithdrawalError:
                logger.exception("could not withdraw evidence %s", evidence.pk)
    else:
        row.state = PointerState.INGESTED
        row.reason = ""
    row.save()


def pointers_settle() -> int:
    """Settle every pending pointer whose pull finished; returns how many changed state."""
    ids = list(
        EvidencePointer.objects.filter(
            state=PointerState.PENDING, upload__state=UploadState.DONE
        ).values_list("pk", flat=True)[: RETRY_BATCH * 10]
    )
    changed = 0
    for pk in ids:
        with transaction.atomic():
            row = (
                # Only the pointer row is locked: PostgreSQL cannot lock the nullable side of
                # the outer joins that bring its upload and evidence along.
                EvidencePointer.objects.select_for_update(of=("self",))
                .select_related("upload__evidence__signer")
                .filter(pk=pk, state=PointerState.PENDING)
                .first()
            )
            if row is None:
                continue
            _settle(row)
            changed += row.state != PointerState.PENDING
    return changed


def pointers_retry(*, now: datetime | None = None, limit: int = RETRY_BATCH) -> int:
    """The beat's work: settle finished pulls, then try the due pointers (at most ``limit``)."""
    now = now or timezone.now()
    pointers_settle()
    tried = 0
    due = EvidencePointer.objects.due(now=now).order_by("next_try", "pk")
    for pk in list(due.values_list("pk", flat=True)[:limit]):
        if pointer_try(pointer_id=pk, now=now) is not None:
            tried += 1
    return tried


# --- importing a tree ----------------------------------------------------------------------------


@dataclass
class ImportReport:
    tree: EvidenceTree
    outcomes: Counter[str] = field(default_factory=Counter)
    states: Counter[str] = field(default_factory=Counter)
    rows: list[EvidencePointer] = field(default_factory=list)

    @property
    def allowlist_text(self) -> str | None:
        body = self.tree.allowlist_body
        return None if body is None else body.decode("utf-8", "replace")


def tree_allowlist(tree: EvidenceTree) -> al.Allowlist | None:
    if tree.allowlist_body is None:
        return None
    try:
        return al.parse_allowlist(tree.allowlist_body)
    except AllowlistError as exc:
        raise PointerImportError(f"the tree's allowlist.yaml is invalid: {exc}") from None


def pointer_import(*, path: Path, now: datetime | None = None) -> ImportReport:
    """Record every pointer file of the tree at ``path`` and try the new ones at once."""
    now = now or timezone.now()
    tree = tree_locate(path)
    allowlist = tree_allowlist(tree)
    allowlist_sha = hashlib.sha256(tree.allowlist_body or b"").hexdigest()
    report = ImportReport(tree=tree)
    for rel, file in pointer_files(tree.evidence_dir):
        body, read_error = b"", ""
        try:
            body = read_bounded_file(file, pc.MAX_POINTER_BYTES)
        except CorroborateError as exc:
            read_error = f"{EVIDENCE_PREFIX}{rel}: unreadable ({exc})"
        row, outcome = pointer_record(
            rel_path=rel,
            body=body,
            tree_allowlist=allowlist,
            allowlist_sha256=allowlist_sha,
            commit=tree.commit,
            now=now,
            read_error=read_error,
        )
        if outcome != "unchanged" and row.next_try is not None:
            row = pointer_try(pointer_id=row.pk, now=now) or row
        report.outcomes[outcome] += 1
        report.rows.append(row)
    pointers_settle()
    for row in report.rows:
        row.refresh_from_db()
        report.states[row.state] += 1
    return report


# --- publishing back -----------------------------------------------------------------------------


class PointerExportError(Exception):
    """Why no pointer can be written for a record."""


@dataclass(frozen=True)
class ExportedPointer:
    path: str
    text: str


def pointer_export(*, evidence: Evidence) -> ExportedPointer:
    """The pointer file AICR's repository expects for ``evidence``, and where it goes."""
    if evidence.verdict != Verdict.VERIFIED or evidence.withdrawn_at is not None:
        raise PointerExportError("only verified evidence that is not withdrawn has a pointer")
    if evidence.is_simulated:
        raise PointerExportError("evidence from a simulated cluster is never published")
    signer = evidence.signer
    if signer.kind != SignerKind.KEYLESS or not signer.issuer or not signer.identity:
        raise PointerExportError(
            "AICR pointers name a keyless signer (OIDC issuer and identity), and this evidence "
            "is signed with a registered key: AICR's allowlist cannot list it"
        )
    oci_ref, digest = evidence.oci_ref, ""
    linked = evidence.pointers.exclude(oci="").order_by("pk").first()
    if not oci_ref and linked is not None:
        oci_ref, digest = linked.oci, linked.bundle_digest
    if not oci_ref:
        raise PointerExportError(
            "this evidence was uploaded as bytes, not pulled from an OCI registry: a pointer "
            "names the bundle's digest-pinned OCI reference, and this site knows none (push it "
            "with `aicr evidence publish --push <ref>` and upload it by reference)"
        )
    if "@" not in oci_ref and not digest:
        raise PointerExportError(f"the OCI reference {oci_ref} is not pinned by digest")
    pointer = pc.Pointer(
        recipe=evidence.recipe_name,
        profile=pointer_profile(evidence.predicate or {}),
        attested_at=evidence.attested_at,
        oci=oci_ref,
        digest=digest or oci_ref.partition("@")[2],
        predicate_type=evidence.predicate_type,
        signer=pc.PointerSigner(
            identity=signer.identity,
            issuer=signer.issuer,
            rekor_log_index=evidence.rekor_log_index,
        ),
    )
    return ExportedPointer(path=pc.pointer_rel_path(pointer), text=pc.render_pointer(pointer))


def pointer_profile(predicate: Mapping[str, Any]) -> str:
    """A pointer's ``profile`` (``name=value``): the predicate's ``profile.selection``."""
    profile = predicate.get("profile") or {}
    selection = profile.get("selection", "") if isinstance(profile, dict) else ""
    return selection if isinstance(selection, str) else ""


def pointer_exportable(evidence: Evidence) -> bool:
    """Whether the evidence page offers the pointer download: counted and exportable."""
    if not Evidence.objects.filter(counted_q(), pk=evidence.pk).exists():
        return False
    try:
        pointer_export(evidence=evidence)
    except PointerExportError:
        return False
    return True
