"""Pointer files: strict parsing and the pointer contract AICR's CI enforces.

Parsing goes through the project's one bounded YAML loader (``recipes_app.resolver.yamlload``:
depth, alias and expanded-node budgets, duplicate keys refused, one document) and decodes the
fixed schema 1.0.0 by hand: an unknown key, a missing field, a wrong type or a second
attestation is a ``PointerError`` whose message names the field.

``check_pointer`` then applies ``verifier.CheckEvidenceTree`` (the ``Evidence Pointer
Contract`` CI job, AICR.md §4.4) to a parsed pointer and its path inside ``recipes/evidence/``:

- nested ``<recipe>[-<profname>-<value>]/<src>/sha256-<hex>.yaml``: ``<src>`` is the first 32
  hex of sha256(issuer + "\\n" + identity) of the claimed signer, ``<hex>`` the bundle digest,
  the pointer is signed, and its signer is allowlisted as community or partner in the *tree's*
  allowlist;
- flat ``<recipe>.yaml``: an unsigned pending pointer (never counted as it stands);
- the bundle is digest-pinned: ``repo@sha256:…`` or ``bundle.digest`` (a tag alone can move).

Each problem is one sentence naming the field or path segment at fault.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

from evidence_app.corroborate import allowlist as al
from recipes_app.resolver import yamlload as y
from recipes_app.resolver.errors import CatalogError

SCHEMA_VERSION = "1.0.0"
MAX_POINTER_BYTES = 1 << 20  # the allowlist loader's ceiling; real pointers are < 1 KB

NESTED = "nested"
FLAT = "flat"

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_FILE_NAME = re.compile(r"sha256-([0-9a-f]{64})\.yaml")
_RECIPE = re.compile(r"[a-z0-9](?:[a-z0-9.-]{0,198}[a-z0-9])?")
_PROFILE_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:\d{2})")

_TOP = frozenset({"schemaVersion", "recipe", "profile", "attestations"})
_ATTESTATION = frozenset({"attestedAt", "bundle", "signer"})
_BUNDLE = frozenset({"oci", "digest", "predicateType"})
_SIGNER = frozenset({"identity", "issuer", "rekorLogIndex"})


class PointerError(ValueError):
    """A pointer file that cannot be read as schema 1.0.0 (the message names the field)."""


@dataclass(frozen=True)
class PointerSigner:
    identity: str
    issuer: str
    rekor_log_index: int | None = None

    @property
    def slug(self) -> str:
        return al.source_slug(self.issuer, self.identity)


@dataclass(frozen=True)
class Pointer:
    recipe: str
    attested_at: datetime
    oci: str
    digest: str  # bundle.digest as written ("" when only the reference pins it)
    predicate_type: str
    profile: str = ""
    signer: PointerSigner | None = None
    schema_version: str = SCHEMA_VERSION

    @property
    def pinned_digest(self) -> str:
        """The bundle's manifest digest: ``bundle.digest``, else the reference's ``@sha256:``."""
        if self.digest:
            return self.digest
        _, at, digest = self.oci.partition("@")
        return digest if at else ""

    @property
    def pinned_oci(self) -> str:
        """``registry/repo[:tag]@sha256:…`` (empty when nothing pins it)."""
        if "@" in self.oci:
            return self.oci
        return f"{self.oci}@{self.digest}" if self.digest else ""

    @property
    def directory(self) -> str:
        """The recipe folder AICR writes: the recipe name, with ``-<profname>-<value>`` added
        when the name does not carry the profile already (AICR's own recipe names do)."""
        if not self.profile:
            return self.recipe
        name, _, value = self.profile.partition("=")
        suffix = f"-{name.lower()}-{value.lower()}"
        return self.recipe if self.recipe.endswith(suffix) else self.recipe + suffix


@dataclass
class ContractResult:
    layout: str  # NESTED, FLAT or "" (neither)
    problems: list[str] = field(default_factory=list)
    claimed_class: str = ""  # the signer's class in the tree's allowlist; "" = not listed

    @property
    def ok(self) -> bool:
        return not self.problems


def registry_of(oci: str) -> str:
    """The registry host[:port] a reference names (lower-cased), "" when it names none."""
    head = oci.removeprefix("oci://").split("/", 1)
    return head[0].lower() if len(head) == 2 else ""


# --- parsing --------------------------------------------------------------------------------


def parse_pointer(body: bytes, *, path: str = "pointer.yaml") -> Pointer:
    """Parse pointer YAML bytes (at most ``MAX_POINTER_BYTES``); ``PointerError`` otherwise."""
    if len(body) > MAX_POINTER_BYTES:
        raise PointerError(f"{path}: larger than {MAX_POINTER_BYTES} bytes")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PointerError(f"{path}: not UTF-8 text (invalid byte at offset {exc.start})") from None
    if "\x00" in text:
        raise PointerError(f"{path}: contains a NUL byte")
    try:
        root = y.parse_raw(text, path)
        return _decode(root, y.Ctx(path))
    except CatalogError as exc:
        raise PointerError(f"{exc.path}: {exc.field}: {exc.message}") from None


def _required(fields: dict[str, y.RawNode], name: str, ctx: y.Ctx) -> str:
    value = y.as_str(fields.get(name), ctx.child(name)).strip()
    if not value:
        raise ctx.child(name).error("is required")
    return value


def _decode(root: y.RawNode, ctx: y.Ctx) -> Pointer:
    top = y.as_fields(root, ctx, _TOP, True, "pointer")
    if not top:
        raise ctx.error("the document is empty")
    schema = _required(top, "schemaVersion", ctx)
    if schema != SCHEMA_VERSION:
        raise ctx.child("schemaVersion").error(
            f"unsupported pointer schemaVersion {schema[:40]!r} (supports {SCHEMA_VERSION})"
        )
    recipe = _required(top, "recipe", ctx)
    if not _RECIPE.fullmatch(recipe):
        raise ctx.child("recipe").error(f"{recipe[:80]!r} is not a recipe name")
    profile = y.as_str(top.get("profile"), ctx.child("profile")).strip()
    if profile:
        name, eq, value = profile.partition("=")
        if not (eq and _PROFILE_PART.fullmatch(name) and _PROFILE_PART.fullmatch(value)):
            raise ctx.child("profile").error(f"{profile[:80]!r} is not name=value")
    items = y.as_seq(top.get("attestations"), ctx.child("attestations"))
    if items is None or len(items) != 1:
        count = 0 if items is None else len(items)
        raise ctx.child("attestations").error(f"must list exactly one attestation, not {count}")
    actx = ctx.child("attestations").index(0)
    att = y.as_fields(items[0], actx, _ATTESTATION, True, "attestation")
    attested_at = _timestamp(_required(att, "attestedAt", actx), actx.child("attestedAt"))
    bctx = actx.child("bundle")
    if y.is_null(att.get("bundle")):
        raise bctx.error("is required")
    bundle = y.as_fields(att.get("bundle"), bctx, _BUNDLE, True, "bundle")
    oci = _required(bundle, "oci", bctx)
    digest = y.as_str(bundle.get("digest"), bctx.child("digest")).strip()
    if digest and not _DIGEST.fullmatch(digest):
        raise bctx.child("digest").error("must be sha256:<64 lowercase hex digits>")
    predicate_type = _required(bundle, "predicateType", bctx)
    signer = None
    if not y.is_null(att.get("signer")):
        sctx = actx.child("signer")
        raw = y.as_fields(att.get("signer"), sctx, _SIGNER, True, "signer")
        index_node = raw.get("rekorLogIndex")
        index = None if y.is_null(index_node) else y.as_int(index_node, sctx.child("rekorLogIndex"))
        if index is not None and index < 0:
            raise sctx.child("rekorLogIndex").error("must not be negative")
        signer = PointerSigner(
            identity=_required(raw, "identity", sctx),
            issuer=_required(raw, "issuer", sctx),
            rekor_log_index=index,
        )
    return Pointer(
        recipe=recipe,
        profile=profile,
        attested_at=attested_at,
        oci=oci,
        digest=digest,
        predicate_type=predicate_type,
        signer=signer,
        schema_version=schema,
    )


def _timestamp(text: str, ctx: y.Ctx) -> datetime:
    if not _RFC3339.fullmatch(text):
        raise ctx.error(f"{text[:40]!r} is not an RFC 3339 time")
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ctx.error(f"{text[:40]!r} is not an RFC 3339 time") from None
    return value.astimezone(UTC)


# --- the contract ---------------------------------------------------------------------------


def check_pointer(
    pointer: Pointer, *, rel_path: str, allowlist: al.Allowlist | None
) -> ContractResult:
    """AICR's pointer contract for ``pointer`` at ``rel_path`` (relative to
    ``recipes/evidence/``, ``/``-separated), against the tree's own ``allowlist``."""
    parts = rel_path.split("/")
    result = ContractResult(layout="")
    signer = pointer.signer
    if signer is not None:
        claimed = al.classify_signer(allowlist, signer.issuer, signer.identity)
        result.claimed_class = claimed.class_ if claimed.allowlisted else ""
    digest = pointer.pinned_digest
    if not digest:
        result.problems.append(
            f"attestations[0].bundle.oci {pointer.oci[:120]!r} names a tag only and no "
            "bundle.digest is given: a tag can be moved, so the bundle is not pinned"
        )
    elif pointer.digest and "@" in pointer.oci and pointer.oci.partition("@")[2] != pointer.digest:
        result.problems.append(
            "attestations[0].bundle.digest differs from the digest in attestations[0].bundle.oci"
        )
    if not registry_of(pointer.oci):
        result.problems.append(
            f"attestations[0].bundle.oci {pointer.oci[:120]!r} does not name a registry"
        )
    if len(parts) == 1:
        result.layout = FLAT
        if parts[0] != f"{pointer.directory}.yaml" and parts[0] != f"{pointer.recipe}.yaml":
            result.problems.append(
                f"path {rel_path!r}: a flat pointer is named <recipe>.yaml, and recipe is "
                f"{pointer.recipe!r}"
            )
        return result
    if len(parts) != 3:
        result.problems.append(
            f"path {rel_path!r} is not <recipe>/<src>/sha256-<digest>.yaml under recipes/evidence/"
        )
        return result
    result.layout = NESTED
    folder, src, name = parts
    if folder not in (pointer.directory, pointer.recipe):
        result.problems.append(
            f"path folder {folder!r} does not match recipe {pointer.recipe!r}"
            + (f" with profile {pointer.profile!r}" if pointer.profile else "")
        )
    match = _FILE_NAME.fullmatch(name)
    if match is None:
        result.problems.append(f"file name {name!r} is not sha256-<64 hex>.yaml")
    elif digest and f"sha256:{match.group(1)}" != digest:
        result.problems.append(
            f"file name {name!r} does not match attestations[0].bundle.digest {digest}"
        )
    if signer is None:
        result.problems.append(
            "unsigned nested pointer: attestations[0].signer is missing (a pointer under "
            "<recipe>/<src>/ must name its signer; an unsigned one is a flat <recipe>.yaml)"
        )
        return result
    if src != signer.slug:
        result.problems.append(
            f"path source {src!r} is not the slug of attestations[0].signer ({signer.slug})"
        )
    if result.claimed_class not in (al.COMMUNITY, al.PARTNER):
        if result.claimed_class == al.FIRST_PARTY:
            result.problems.append(
                f"attestations[0].signer (source {signer.slug}) is first-party in the tree's "
                "allowlist.yaml: first-party evidence is ingested directly, not by pointer"
            )
        else:
            result.problems.append(
                f"attestations[0].signer (source {signer.slug}, issuer {signer.issuer}) is not "
                "allowlisted as community or partner in the tree's allowlist.yaml"
            )
    return result


# --- publishing back ------------------------------------------------------------------------


def pointer_rel_path(pointer: Pointer) -> str:
    """Where AICR expects ``pointer``: ``recipes/evidence/<dir>/<src>/sha256-<hex>.yaml``."""
    if pointer.signer is None:
        return f"recipes/evidence/{pointer.directory}.yaml"
    hex_digest = pointer.pinned_digest.removeprefix("sha256:")
    return f"recipes/evidence/{pointer.directory}/{pointer.signer.slug}/sha256-{hex_digest}.yaml"


_NULLS = frozenset(("", "~", "null", "Null", "NULL"))
_PLAIN_SAFE = re.compile(r"[A-Za-z0-9_./+@=-][A-Za-z0-9_./+@=:-]*")


def _scalar(value: str) -> str:
    # Plain when YAML reads the text back as that very string; otherwise JSON's double-quoted
    # form, which is valid YAML and yaml.v3 reads the same.
    if _PLAIN_SAFE.fullmatch(value) and not value.endswith(":") and value not in _NULLS:
        resolved = y.resolve_plain(value)
        if isinstance(resolved, str) and resolved == value:
            return value
    return json.dumps(value)


def render_pointer(pointer: Pointer) -> str:
    """The pointer file, keys sorted as AICR writes them (``attestations`` … ``schemaVersion``)."""
    attested = pointer.attested_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    lines = [
        "attestations:",
        f"  - attestedAt: {attested}",
        "    bundle:",
    ]
    if pointer.digest:
        lines.append(f"      digest: {pointer.digest}")
    lines += [
        f"      oci: {_scalar(pointer.oci)}",
        f"      predicateType: {_scalar(pointer.predicate_type)}",
    ]
    if pointer.signer is not None:
        lines += [
            "    signer:",
            f"      identity: {_scalar(pointer.signer.identity)}",
            f"      issuer: {_scalar(pointer.signer.issuer)}",
        ]
        if pointer.signer.rekor_log_index is not None:
            lines.append(f"      rekorLogIndex: {pointer.signer.rekor_log_index}")
    if pointer.profile:
        lines.append(f"profile: {_scalar(pointer.profile)}")
    lines += [f"recipe: {_scalar(pointer.recipe)}", f"schemaVersion: {SCHEMA_VERSION}"]
    return "\n".join(lines) + "\n"
