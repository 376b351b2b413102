"""The signer allowlist (``recipes/evidence/allowlist.yaml``): load, validate, classify.

Port of ``pkg/evidence/allowlist`` as used by ``pkg/corroborate``. The allowlist is the trust
root of corroboration, so it must not itself become a sybil surface:

- ``schemaVersion`` must be on the 1.0.x line (a future schema may change trust semantics);
- first-party entries are ``{label?, issuer, identityPattern}`` with a fully anchored regex
  whose issuer/org/repo/workflow part (left of the OIDC subject's ``@``) is literal;
- community/partner entries are ``{label?, issuer, source}`` keyed by the one-way 32-hex
  source slug; a cleartext ``identity:`` (or any unknown key) is rejected, so a personal
  identity cannot be reintroduced by accident;
- labels, source slugs and pattern prefixes are unique, so one verified signer matches at
  most one entry and the three classes stay disjoint.

Parsing is bounded: the file is read up to 1 MiB, only the first YAML document is used (as
Go's ``yaml.Decoder.Decode`` does), and the composed nodes are decoded into the fixed schema
by hand (duplicate keys and unknown fields are errors, a null scalar is the zero value, any
other scalar keeps its literal text, like ``yaml.v3`` decoding into a ``string`` field).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from .errors import AllowlistError, CorroborateError, ErrorCode
from .files import read_bounded_file

SCHEMA_VERSION = "1.0.0"
SOURCE_SLUG_LENGTH = 32
MAX_ALLOWLIST_BYTES = 1 << 20  # 1 MiB, the pointer loader's ceiling

FIRST_PARTY = "first-party"
COMMUNITY = "community"
PARTNER = "partner"

_CLASS_SECTIONS = (("firstParty", FIRST_PARTY), ("community", COMMUNITY), ("partner", PARTNER))
_ENTRY_FIELDS = ("label", "issuer", "source", "identityPattern")
_HEX_SLUG = re.compile(f"[0-9a-f]{{{SOURCE_SLUG_LENGTH}}}")
_REGEX_META = frozenset(".*+?()[]{}|^$")
# RE2 (Go) rejects lookaround and backreferences that Python's ``re`` would accept; refusing
# them keeps a pattern that Go would reject from granting weight here.
_NON_RE2 = re.compile(r"\(\?(?:=|!|<=|<!|P=)|\\[1-9]")
_NULL_SCALARS = frozenset({"", "~", "null", "Null", "NULL"})


def _identity_hash(issuer: str, identity: str) -> str:
    # The newline is a domain separator: ("a\nb", "") and ("a", "b") cannot collide.
    return hashlib.sha256(f"{issuer}\n{identity}".encode()).hexdigest()


def source_id(issuer: str, identity: str) -> str:
    """The public source id: full hex sha256 of ``issuer + "\\n" + identity``."""
    return _identity_hash(issuer, identity)


def source_slug(issuer: str, identity: str) -> str:
    """The allowlist/pointer ``<src>`` slug: the first 32 hex of the source id.

    Raises ``ValueError`` for an empty issuer or identity (every such signer would collide).
    """
    if not issuer or not identity:
        raise ValueError("source slug requires non-empty issuer and identity")
    return _identity_hash(issuer, identity)[:SOURCE_SLUG_LENGTH]


@dataclass(frozen=True, slots=True)
class AllowlistEntry:
    """One pinned signer: exactly one of ``source`` or ``identity_pattern`` is set."""

    class_: str
    issuer: str
    label: str = ""
    source: str = ""
    identity_pattern: str = ""

    @property
    def display_id(self) -> str:
        if self.label:
            return self.label
        if self.source:
            return f"source {self.source}"
        return f"pattern {self.identity_pattern}"


@dataclass(frozen=True, slots=True)
class Classification:
    """A verified signer's class and weight. Unlisted: ``community``, not allowlisted."""

    class_: str
    allowlisted: bool
    label: str = ""


@dataclass(frozen=True)
class Allowlist:
    """A validated allowlist; entries in class order (first-party, community, partner)."""

    schema_version: str
    entries: tuple[AllowlistEntry, ...]

    def classify(self, issuer: str, identity: str) -> Classification:
        return classify_signer(self, issuer, identity)

    @functools.cached_property
    def issuers(self) -> tuple[str, ...]:
        """Its entries' issuers, each once, in entry order: read at every upload (the
        accepted issuers), so computed once per parsed allowlist (thousands of entries)."""
        return tuple(dict.fromkeys(e.issuer for e in self.entries))


# --- classification -----------------------------------------------------------------------


def classify_signer(allowlist: Allowlist | None, issuer: str, identity: str) -> Classification:
    """Classify a *verified* (issuer, identity) pair against the allowlist.

    A slug entry matches when its source slug and issuer equal the signer's; a pattern entry
    when its issuer is equal and its anchored regex matches the whole identity. Slug matches
    take precedence. A signer matching nothing is admitted as a zero-weight reported source:
    class ``community``, ``allowlisted`` false. The class itself carries no consensus weight;
    only ``allowlisted`` does.
    """
    if allowlist is None:
        return Classification(COMMUNITY, False)
    if issuer and identity:
        slug = source_slug(issuer, identity)
        for e in allowlist.entries:
            if e.source and e.source == slug and e.issuer == issuer:
                return Classification(e.class_, True, e.label)
    for e in allowlist.entries:
        if not e.identity_pattern or e.issuer != issuer:
            continue
        # fullmatch, not search: Go's "$" only matches at the end of the text, Python's also
        # before a trailing newline.
        if _compiled(e.identity_pattern).fullmatch(identity):
            return Classification(e.class_, True, e.label)
    return Classification(COMMUNITY, False)


_PATTERN_CACHE: dict[str, re.Pattern[str]] = {}


def _compiled(pattern: str) -> re.Pattern[str]:
    compiled = _PATTERN_CACHE.get(pattern)
    if compiled is None:
        compiled = _PATTERN_CACHE.setdefault(pattern, re.compile(pattern))
    return compiled


# --- loading --------------------------------------------------------------------------------


def load_allowlist(path: str | os.PathLike[str]) -> Allowlist:
    """Read (bounded), parse and validate the allowlist at ``path``; fails closed."""
    try:
        body = read_bounded_file(Path(path), MAX_ALLOWLIST_BYTES, follow_symlinks=True)
    except CorroborateError as exc:
        raise AllowlistError(exc.code, f"allowlist: {exc}") from exc
    return parse_allowlist(body)


def parse_allowlist(body: bytes) -> Allowlist:
    """Parse and validate allowlist YAML bytes (raises ``AllowlistError``)."""
    if len(body) > MAX_ALLOWLIST_BYTES:
        raise _invalid("allowlist file exceeds size limit (1 MiB)")
    try:
        docs = yaml.compose_all(body, Loader=yaml.SafeLoader)
        root = next(iter(docs), None)
    except yaml.YAMLError as exc:
        raise _invalid(f"allowlist file is not valid YAML: {exc}") from exc
    except RecursionError:
        # PyYAML's composer recurses once per level: Go's yaml.v3 (which AICR's reader is)
        # refuses deep documents too, so this is an invalid allowlist, not a crash.
        raise _invalid("allowlist file is not valid YAML: nested too deeply") from None
    raw = _decode_document(root)
    schema = raw.pop("schemaVersion")
    entries: list[AllowlistEntry] = []
    for section, class_ in _CLASS_SECTIONS:
        for fields in raw[section]:
            entries.append(AllowlistEntry(class_=class_, **fields))
    allowlist = Allowlist(schema_version=schema, entries=tuple(entries))
    validate_allowlist(allowlist)
    return allowlist


def _invalid(message: str) -> AllowlistError:
    return AllowlistError(ErrorCode.INVALID_REQUEST, message)


def _is_null(node: yaml.Node) -> bool:
    return (
        isinstance(node, yaml.ScalarNode)
        and node.style is None
        and node.tag == "tag:yaml.org,2002:null"
        and node.value in _NULL_SCALARS
    )


def _mapping_items(node: yaml.MappingNode, where: str) -> list[tuple[str, yaml.Node]]:
    items: list[tuple[str, yaml.Node]] = []
    seen: set[str] = set()
    for key_node, value_node in node.value:
        if not isinstance(key_node, yaml.ScalarNode):
            raise _invalid(f"allowlist {where}: mapping keys must be scalars")
        if key_node.tag == "tag:yaml.org,2002:merge":
            raise _invalid(f"allowlist {where}: merge keys are not supported")
        if key_node.value in seen:
            raise _invalid(f"allowlist {where}: mapping key {key_node.value!r} already defined")
        seen.add(key_node.value)
        items.append((key_node.value, value_node))
    return items


def _string(node: yaml.Node, where: str) -> str:
    if _is_null(node):
        return ""
    if not isinstance(node, yaml.ScalarNode):
        raise _invalid(f"allowlist {where}: want a string")
    return str(node.value)


def _decode_entry(node: yaml.Node, where: str) -> dict[str, str]:
    out = {"label": "", "issuer": "", "source": "", "identity_pattern": ""}
    if _is_null(node):
        return out
    if not isinstance(node, yaml.MappingNode):
        raise _invalid(f"allowlist {where}: want a mapping")
    for key, value in _mapping_items(node, where):
        if key not in _ENTRY_FIELDS:
            # Fails closed on a stray cleartext `identity:` or any typo'd key.
            raise _invalid(f"allowlist {where}: field {key} not found in type allowlist.Entry")
        out["identity_pattern" if key == "identityPattern" else key] = _string(
            value, f"{where}.{key}"
        )
    return out


def _decode_document(root: yaml.Node | None) -> dict:
    raw: dict = {"schemaVersion": "", "firstParty": [], "community": [], "partner": []}
    if root is None or _is_null(root):
        return raw
    if not isinstance(root, yaml.MappingNode):
        raise _invalid("allowlist file is not valid YAML: document is not a mapping")
    for key, value in _mapping_items(root, "document"):
        if key == "schemaVersion":
            raw[key] = _string(value, key)
        elif key in ("firstParty", "community", "partner"):
            if _is_null(value):
                raw[key] = []
                continue
            if not isinstance(value, yaml.SequenceNode):
                raise _invalid(f"allowlist {key}: want a list")
            raw[key] = [_decode_entry(n, f"{key}[{i}]") for i, n in enumerate(value.value)]
        else:
            raise _invalid(f"allowlist: field {key} not found in type allowlist.Allowlist")
    return raw


# --- validation -----------------------------------------------------------------------------


def validate_allowlist(allowlist: Allowlist) -> None:
    """Enforce the anti-sybil invariants (raises ``AllowlistError``)."""
    v = allowlist.schema_version
    if not (v.startswith("1.0.") or v == "1.0"):
        raise _invalid(f"unsupported allowlist schemaVersion {v} (supports 1.0.x)")
    for e in allowlist.entries:
        _validate_entry(e)
    _check_disjoint(allowlist.entries)


def _validate_entry(e: AllowlistEntry) -> None:
    if not e.issuer:
        raise _invalid(f"allowlist entry {e.display_id} in {e.class_} is missing issuer")
    if (e.source == "") == (e.identity_pattern == ""):
        raise _invalid(
            f"allowlist entry {e.display_id} must set exactly one of source or identityPattern"
        )
    if e.source:
        if not _HEX_SLUG.fullmatch(e.source):
            raise _invalid(
                f"allowlist entry {e.display_id} source must be a "
                f"{SOURCE_SLUG_LENGTH}-character lowercase-hex slug"
            )
        return
    _check_not_over_broad(e.display_id, e.identity_pattern)
    if _NON_RE2.search(e.identity_pattern):
        raise _invalid(f"allowlist entry {e.display_id} has an invalid identityPattern")
    try:
        _compiled(e.identity_pattern)
    except re.error as exc:
        raise _invalid(
            f"allowlist entry {e.display_id} has an invalid identityPattern: {exc}"
        ) from exc


def _index_unescaped(s: str, ch: str) -> int:
    i = 0
    while i < len(s):
        if s[i] == "\\":
            i += 2  # skip the escaped character
            continue
        if s[i] == ch:
            return i
        i += 1
    return -1


def _first_unescaped_meta(s: str) -> int:
    i = 0
    while i < len(s):
        if s[i] == "\\":
            i += 2  # an escaped metacharacter is a literal
            continue
        if s[i] in _REGEX_META:
            return i
        i += 1
    return -1


def _check_not_over_broad(display_id: str, pattern: str) -> None:
    # A wildcard left of the subject's "@" could match an arbitrary org or repo: exactly the
    # sybil surface the allowlist exists to prevent. Only the ref may be bounded-wildcard.
    if not (pattern.startswith("^") and pattern.endswith("$")):
        raise _invalid(
            f"allowlist entry {display_id} identityPattern must be fully anchored with ^ and $"
        )
    body = pattern[1:-1]
    at = _index_unescaped(body, "@")
    if at < 0:
        raise _invalid(
            f"allowlist entry {display_id} identityPattern must contain an OIDC subject of "
            "the form <issuer-path>@<ref>"
        )
    if _first_unescaped_meta(body[:at]) >= 0:
        raise _invalid(
            f"allowlist entry {display_id} identityPattern has a wildcard in the issuer/org/"
            "repo/workflow segment (over-broad): only the ref (right of '@') may be "
            "bounded-wildcard"
        )


def _unescape_regex(s: str) -> str:
    out = []
    i = 0
    while i < len(s):
        if s[i] == "\\" and i + 1 < len(s):
            i += 1
        out.append(s[i])
        i += 1
    return "".join(out)


def _literal_prefix(pattern: str) -> str:
    body = pattern.removeprefix("^").removesuffix("$")
    at = _index_unescaped(body, "@")
    return body if at < 0 else _unescape_regex(body[:at])


def _check_disjoint(entries: tuple[AllowlistEntry, ...]) -> None:
    labels: set[str] = set()
    for e in entries:
        if not e.label:
            continue  # fully pseudonymous entries may all omit the label
        if e.label in labels:
            raise _invalid(f"allowlist has a duplicate entry label {e.label}")
        labels.add(e.label)
    seen_source: dict[str, str] = {}
    seen_pattern: dict[tuple[str, str], str] = {}
    for e in entries:
        if e.source:
            if e.source in seen_source:
                raise _invalid(
                    f"allowlist entries {seen_source[e.source]} and {e.display_id} share the "
                    "same source slug"
                )
            seen_source[e.source] = e.display_id
            continue
        key = (e.issuer, _literal_prefix(e.identity_pattern))
        if key in seen_pattern:
            raise _invalid(
                f"allowlist entries {seen_pattern[key]} and {e.display_id} have overlapping "
                "identity patterns"
            )
        seen_pattern[key] = e.display_id
