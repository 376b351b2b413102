"""Bounded YAML loading with Go ``gopkg.in/yaml.v3`` (v3.0.1) typing.

AICR decodes its catalog with yaml.v3 into Go structs, and that decides what the resolved
recipe contains:

- a ``string`` struct field keeps the *source text* of a scalar (``value: 24.04`` is the
  string ``"24.04"``, ``version: 1.20`` is ``"1.20"``), a plain null (``~``, ``null``, empty)
  leaves it ``""``;
- values inside ``overrides`` (``map[string]any``) get yaml.v3's own scalar typing, which is
  YAML 1.2 core plus some YAML 1.1 leftovers and differs from PyYAML (``yes`` stays a string,
  ``0o17`` is an int, ``08`` is the float 8, ``2026-08-19`` a timestamp).

So the document is first parsed into a small *raw* tree (``RawScalar`` keeps text, style and
tag; ``RawMap``/``RawSeq`` keep order and line numbers) by driving libyaml's event parser (the
C parser when PyYAML has it), and the schema code in ``catalog.py`` converts each field with the
converter its Go type implies (``as_str``, ``as_bool``, ``as_int``, ``as_any`` ...).

Building the raw tree from events (instead of ``yaml.compose``) keeps the construction
iterative and lets it refuse hostile input before anything is expanded: nesting depth, the
number of aliases and the *expanded* node count (aliases counted as copies, the "billion
laughs" measure) are all bounded; recursive aliases and duplicate mapping keys are rejected
like yaml.v3 does.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import math
import re
from collections.abc import Callable, Iterator
from typing import Any

import yaml

from .errors import CatalogError

try:  # The C event parser is ~10x faster; fall back to the pure-Python one.
    _LOADER: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on the PyYAML build
    _LOADER = yaml.SafeLoader

#: Largest file the resolver reads (the biggest real catalog file is ~600 KB of CRDs).
MAX_FILE_BYTES = 8 * 1024 * 1024
#: Deepest nesting allowed, counted after alias expansion (real catalog: < 20).
MAX_DEPTH = 64
#: Aliases allowed per document (the real catalog uses none).
MAX_ALIASES = 32
#: Nodes per document after alias expansion (real overlays: < 2 000).
MAX_NODES = 200_000
#: Longest plain scalar that reads as a number (digits, sign, base prefix, ``_``, ``.``, ``e``).
#: An int64 has 19 digits and a float64 round-trips in 24 characters, so nothing real comes
#: near; the limit sits far below Python's 4,300-digit ``int()`` conversion limit, so no
#: hostile literal reaches a conversion that raises (or costs quadratic time) and every one is
#: refused by name instead.
MAX_NUMBER_CHARS = 1_000
_NUMBERISH = re.compile(r"[-+]?(?:0[xXoObB])?[0-9a-fA-F_.]*[eE]?[-+]?[0-9_]*")


class RawScalar:
    """A scalar as written: text, whether it was plain (unquoted), explicit tag, line."""

    __slots__ = ("line", "plain", "size", "tag", "value")

    def __init__(self, value: str, plain: bool, tag: str | None, line: int) -> None:
        self.value = value
        self.plain = plain
        self.tag = tag
        self.line = line
        self.size = 1


class RawMap:
    """A mapping as an ordered list of (key, value) raw-node pairs."""

    __slots__ = ("height", "line", "pairs", "size")

    def __init__(self, line: int) -> None:
        self.pairs: list[tuple[RawNode, RawNode]] = []
        self.line = line
        self.size = 1
        self.height = 1


class RawSeq:
    """A sequence of raw nodes."""

    __slots__ = ("height", "items", "line", "size")

    def __init__(self, line: int) -> None:
        self.items: list[RawNode] = []
        self.line = line
        self.size = 1
        self.height = 1


RawNode = RawScalar | RawMap | RawSeq

_STR_TAG = "tag:yaml.org,2002:str"
_BINARY_TAG = "tag:yaml.org,2002:binary"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_SHORT_TAGS = {
    "tag:yaml.org,2002:" + t: "!!" + t
    for t in ("null", "bool", "str", "int", "float", "timestamp", "seq", "map", "binary", "merge")
}
_NUMBER_TAGS = frozenset(("tag:yaml.org,2002:int", "tag:yaml.org,2002:float"))


def overlong_number(event: yaml.ScalarEvent) -> str | None:
    """Why a scalar event is refused as a number literal longer than ``MAX_NUMBER_CHARS``
    (plain, or tagged ``!!int``/``!!float``; quoted text of any length stays text), else
    ``None``. Every YAML reader of untrusted text calls this on its event stream."""
    value = event.value
    if len(value) <= MAX_NUMBER_CHARS or value[:1] not in "+-.0123456789":
        return None
    tagged = event.tag not in (None, "!")
    if (tagged and event.tag not in _NUMBER_TAGS) or (event.style and not tagged):
        return None
    if not _NUMBERISH.fullmatch(value):
        return None
    return f"number literal of {len(value)} characters (limit {MAX_NUMBER_CHARS})"


def _check_number_length(event: yaml.ScalarEvent, path: str, line: int, col: int) -> None:
    problem = overlong_number(event)
    if problem is not None:
        raise CatalogError(path, f"line {line}, column {col}", problem)


def _height(node: RawNode) -> int:
    return 1 if isinstance(node, RawScalar) else node.height


def parse_raw(text: str, path: str) -> RawNode:
    """Parse one YAML document into a raw tree, enforcing the size/depth/alias budgets.

    Raises ``CatalogError(path, "line L, column C", ...)`` for syntax errors and for input that
    exceeds a budget. An empty file or a second document is refused too (the catalog's files
    are single-document; AICR silently ignores extra documents, which would hide content).
    """
    if len(text) > MAX_FILE_BYTES:
        raise CatalogError(path, "<file>", f"file is larger than {MAX_FILE_BYTES} bytes")
    anchors: dict[str, RawNode] = {}
    in_progress: set[int] = set()
    # Each stack frame: [container, pending_key_or_None, seen_keys]
    stack: list[list[Any]] = []
    root: RawNode | None = None
    documents = 0
    aliases = 0

    def attach(node: RawNode, line: int, col: int) -> None:
        nonlocal root
        if not stack:
            root = node
            return
        frame = stack[-1]
        parent = frame[0]
        parent.size += node.size
        if parent.size > MAX_NODES:
            raise CatalogError(
                path,
                f"line {line}, column {col}",
                f"document expands to more than {MAX_NODES} nodes (YAML bomb?)",
            )
        parent.height = max(parent.height, _height(node) + 1)
        if parent.height + len(stack) - 1 > MAX_DEPTH:
            raise CatalogError(
                path, f"line {line}, column {col}", f"nesting deeper than {MAX_DEPTH} levels"
            )
        if isinstance(parent, RawSeq):
            parent.items.append(node)
            return
        if frame[1] is None:
            # This node is a key; remember it until its value arrives.
            if isinstance(node, RawScalar):
                key = node.value
                if key in frame[2] and not (node.plain and key == "<<"):
                    raise CatalogError(
                        path,
                        f"line {line}, column {col}",
                        f"mapping key {key!r} already defined at line {frame[2][key]}",
                    )
                frame[2][key] = line
            frame[1] = node
        else:
            parent.pairs.append((frame[1], node))
            frame[1] = None

    try:
        for event in yaml.parse(text, Loader=_LOADER):
            mark = event.start_mark
            line = mark.line + 1 if mark is not None else 0
            col = mark.column + 1 if mark is not None else 0
            if isinstance(event, yaml.ScalarEvent):
                _check_number_length(event, path, line, col)
                node: RawNode = RawScalar(
                    event.value,
                    not event.style,  # None (pure parser) or "" (C parser) = plain
                    None if event.tag in (None, "!") else event.tag,
                    line,
                )
                if event.anchor:
                    anchors[event.anchor] = node
                attach(node, line, col)
            elif isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
                if len(stack) >= MAX_DEPTH:
                    raise CatalogError(
                        path,
                        f"line {line}, column {col}",
                        f"nesting deeper than {MAX_DEPTH} levels",
                    )
                coll: RawNode = (
                    RawMap(line) if isinstance(event, yaml.MappingStartEvent) else RawSeq(line)
                )
                if event.anchor:
                    anchors[event.anchor] = coll
                in_progress.add(id(coll))
                stack.append([coll, None, {}])
            elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
                coll = stack.pop()[0]
                in_progress.discard(id(coll))
                attach(coll, line, col)
            elif isinstance(event, yaml.AliasEvent):
                aliases += 1
                if aliases > MAX_ALIASES:
                    raise CatalogError(
                        path,
                        f"line {line}, column {col}",
                        f"more than {MAX_ALIASES} aliases in one document",
                    )
                target = anchors.get(event.anchor or "")
                if target is None:
                    raise CatalogError(
                        path, f"line {line}, column {col}", f"unknown anchor {event.anchor!r}"
                    )
                if id(target) in in_progress:
                    raise CatalogError(
                        path,
                        f"line {line}, column {col}",
                        f"anchor {event.anchor!r} is aliased inside itself",
                    )
                attach(target, line, col)
            elif isinstance(event, yaml.DocumentStartEvent):
                documents += 1
                if documents > 1:
                    raise CatalogError(
                        path, f"line {line}, column {col}", "file contains more than one document"
                    )
                anchors.clear()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "<document>"
        problem = getattr(exc, "problem", None) or str(exc)
        raise CatalogError(path, where, f"malformed YAML: {problem}") from None
    if root is None:
        raise CatalogError(path, "<document>", "file contains no YAML document")
    return root


# --- yaml.v3 scalar resolution ---------------------------------------------------------------

_NULLS = frozenset(("", "~", "null", "Null", "NULL"))
_RESOLVE_MAP: dict[str, Any] = {
    "true": True,
    "True": True,
    "TRUE": True,
    "false": False,
    "False": False,
    "FALSE": False,
    ".nan": math.nan,
    ".NaN": math.nan,
    ".NAN": math.nan,
    ".inf": math.inf,
    ".Inf": math.inf,
    ".INF": math.inf,
    "+.inf": math.inf,
    "+.Inf": math.inf,
    "+.INF": math.inf,
    "-.inf": -math.inf,
    "-.Inf": -math.inf,
    "-.INF": -math.inf,
}
_YAML_STYLE_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
_DOT_FLOAT = re.compile(r"^\.[0-9]+([eE][-+]?[0-9]+)?$")
_DIGITS = {
    2: frozenset("01"),
    8: frozenset("01234567"),
    10: frozenset("0123456789"),
    16: frozenset("0123456789abcdefABCDEF"),
}
_INT64_MIN, _INT64_MAX, _UINT64_MAX = -(1 << 63), (1 << 63) - 1, (1 << 64) - 1
_MAX_UINT64_DIGITS = {2: 64, 8: 22, 10: 20, 16: 16}
_TS_DATE = re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2})$")
_TS_T = re.compile(
    r"^(\d{4})-(\d{1,2})-(\d{1,2})[Tt](\d{1,2}):(\d{1,2}):(\d{1,2})(\.\d+)?(Z|[+-]\d{2}:\d{2})$"
)
_TS_SPACE = re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2}) (\d{1,2}):(\d{1,2}):(\d{1,2})(\.\d+)?$")
_YAML11_TRUE = frozenset(("y", "Y", "yes", "Yes", "YES", "on", "On", "ON"))
_YAML11_FALSE = frozenset(("n", "N", "no", "No", "NO", "off", "Off", "OFF"))


def _go_parse_int(s: str) -> int | None:
    """``strconv.ParseInt(s, 0, 64)`` then ``ParseUint(s, 0, 64)`` (underscores pre-removed)."""
    body, neg = s, False
    if body[:1] in "+-":
        neg = body[0] == "-"
        body = body[1:]
        signed = True
    else:
        signed = False
    if not body:
        return None
    base, digits = 10, body
    low = body[:2].lower()
    if low == "0x":
        base, digits = 16, body[2:]
    elif low == "0b":
        base, digits = 2, body[2:]
    elif low == "0o":
        base, digits = 8, body[2:]
    elif body[0] == "0" and len(body) > 1:
        base, digits = 8, body[1:]
    allowed = _DIGITS[base]
    if not digits or not all(c in allowed for c in digits):
        return None
    if len(digits.lstrip("0")) > _MAX_UINT64_DIGITS[base]:
        return None  # out of uint64 range whatever the digits: Go's ErrRange, no int() at all
    value = int(digits, base)
    value = -value if neg else value
    if _INT64_MIN <= value <= _INT64_MAX:
        return value
    if not signed and 0 <= value <= _UINT64_MAX:
        return value  # ParseUint fallback (no sign allowed there)
    return None


def _go_parse_float(s: str) -> float | None:
    try:
        value = float(s)
    except ValueError:
        return None
    if math.isinf(value):
        return None  # Go's ParseFloat reports ErrRange for overflow
    return value


def _parse_timestamp(s: str) -> dt.datetime | None:
    if len(s) < 5 or not s[:4].isdigit() or s[4] != "-":
        return None
    try:
        m = _TS_DATE.match(s)
        if m:
            return dt.datetime(int(m[1]), int(m[2]), int(m[3]), tzinfo=dt.UTC)
        m = _TS_T.match(s) or _TS_SPACE.match(s)
        if not m:
            return None
        micro = int((m[7] or ".0")[1:7].ljust(6, "0"))
        tz: dt.tzinfo = dt.UTC
        if m.re is _TS_T and m[8] != "Z":
            sign = 1 if m[8][0] == "+" else -1
            tz = dt.timezone(sign * dt.timedelta(hours=int(m[8][1:3]), minutes=int(m[8][4:6])))
        return dt.datetime(
            int(m[1]), int(m[2]), int(m[3]), int(m[4]), int(m[5]), int(m[6]), micro, tzinfo=tz
        )
    except ValueError:
        return None


def resolve_plain(s: str) -> Any:
    """The value yaml.v3 gives an untagged plain scalar decoded into ``interface{}``."""
    if s in _NULLS:
        return None
    if s in _RESOLVE_MAP:
        return _RESOLVE_MAP[s]
    first = s[0]
    if first == ".":
        if _DOT_FLOAT.match(s):
            return _go_parse_float(s)
        return s
    if first in "+-0123456789":
        ts = _parse_timestamp(s)
        if ts is not None:
            return ts
        plain = s.replace("_", "")
        iv = _go_parse_int(plain)
        if iv is not None:
            return iv
        if _YAML_STYLE_FLOAT.match(plain):
            fv = _go_parse_float(plain)
            if fv is not None:
                return fv
    return s


def _tagged(node: RawScalar, where: Callable[[], tuple[str, str]]) -> Any:
    tag = node.tag
    if tag == _STR_TAG:
        return node.value
    if tag == _BINARY_TAG:
        try:
            return base64.b64decode(node.value, validate=False).decode("utf-8", "replace")
        except (binascii.Error, ValueError):
            path, field = where()
            raise CatalogError(path, field, "!!binary value contains invalid base64 data") from None
    short = _SHORT_TAGS.get(tag or "")
    if short is None:
        return node.value  # unknown local tags: yaml.v3 keeps the text
    value = resolve_plain(node.value)
    kind = {
        "!!null": type(None),
        "!!bool": bool,
        "!!int": int,
        "!!float": float,
        "!!timestamp": dt.datetime,
    }.get(short)
    if kind is float and type(value) is int:
        return float(value)
    if kind is None or type(value) is kind:
        return value
    path, field = where()
    raise CatalogError(path, field, f"cannot decode `{node.value}` as a {short}")


def scalar_value(node: RawScalar, where: Callable[[], tuple[str, str]]) -> Any:
    """yaml.v3 typing of one scalar for an ``interface{}`` target."""
    if node.tag is not None:
        return _tagged(node, where)
    if not node.plain:
        return node.value
    return resolve_plain(node.value)


def effective_pairs(node: RawMap) -> Iterator[tuple[RawNode, RawNode]]:
    """Mapping pairs with YAML merge keys (``<<: *anchor``) applied, explicit keys winning."""
    merged: list[tuple[RawNode, RawNode]] = []
    explicit: list[tuple[RawNode, RawNode]] = []
    for key, value in node.pairs:
        if (
            isinstance(key, RawScalar)
            and key.plain
            and key.value == "<<"
            and key.tag
            in (
                None,
                _MERGE_TAG,
            )
        ):
            sources = value.items if isinstance(value, RawSeq) else [value]
            for src in sources:
                if isinstance(src, RawMap):
                    merged.extend(effective_pairs(src))
            continue
        explicit.append((key, value))
    if not merged:
        yield from explicit
        return
    explicit_keys = {k.value for k, _ in explicit if isinstance(k, RawScalar)}
    seen: set[str] = set()
    for key, value in merged:
        k = key.value if isinstance(key, RawScalar) else None
        if k is not None and (k in explicit_keys or k in seen):
            continue
        if k is not None:
            seen.add(k)
        yield key, value
    yield from explicit


# --- converters used by the schema code ------------------------------------------------------


class Ctx:
    """Where a value lives (file + dotted field path), for error messages."""

    __slots__ = ("field", "path")

    def __init__(self, path: str, field: str = "") -> None:
        self.path = path
        self.field = field

    def child(self, name: str) -> Ctx:
        return Ctx(self.path, f"{self.field}.{name}" if self.field else name)

    def index(self, i: int) -> Ctx:
        return Ctx(self.path, f"{self.field}[{i}]")

    def error(self, message: str) -> CatalogError:
        return CatalogError(self.path, self.field or "<document>", message)

    def where(self) -> tuple[str, str]:
        return self.path, self.field or "<document>"


def _kind(node: RawNode) -> str:
    if isinstance(node, RawMap):
        return "!!map"
    if isinstance(node, RawSeq):
        return "!!seq"
    return "!!str"


def is_null(node: RawNode | None) -> bool:
    """True for an absent value or a plain/explicit null scalar."""
    if node is None:
        return True
    if not isinstance(node, RawScalar):
        return False
    if node.tag is not None:
        return node.tag == "tag:yaml.org,2002:null"
    return node.plain and node.value in _NULLS


def as_str(node: RawNode | None, ctx: Ctx) -> str:
    """A Go ``string`` field: the scalar's source text; null leaves it empty."""
    if node is None or is_null(node):
        return ""
    if not isinstance(node, RawScalar):
        raise ctx.error(f"cannot unmarshal {_kind(node)} into a string")
    if node.tag == _BINARY_TAG:
        return str(_tagged(node, ctx.where))
    return node.value


def as_bool(node: RawNode | None, ctx: Ctx) -> bool:
    """A Go ``bool`` field (accepts YAML 1.1 yes/no/on/off like yaml.v3 does for typed bools)."""
    if node is None or is_null(node):
        return False
    if isinstance(node, RawScalar):
        value = scalar_value(node, ctx.where)
        if isinstance(value, bool):
            return value
        if isinstance(value, str):
            if value in _YAML11_TRUE:
                return True
            if value in _YAML11_FALSE:
                return False
        raise ctx.error(f"cannot unmarshal `{node.value}` into a bool")
    raise ctx.error(f"cannot unmarshal {_kind(node)} into a bool")


def as_int(node: RawNode | None, ctx: Ctx) -> int:
    """A Go ``int`` field."""
    if node is None or is_null(node):
        return 0
    if isinstance(node, RawScalar):
        value = scalar_value(node, ctx.where)
        if isinstance(value, int) and not isinstance(value, bool):
            if _INT64_MIN <= value <= _INT64_MAX:
                return value
        elif isinstance(value, float) and math.isfinite(value) and abs(value) <= _INT64_MAX:
            return int(value)
        raise ctx.error(f"cannot unmarshal `{node.value}` into an int")
    raise ctx.error(f"cannot unmarshal {_kind(node)} into an int")


def as_str_list(node: RawNode | None, ctx: Ctx) -> list[str] | None:
    """A Go ``[]string`` field; ``None`` when absent/null (Go nil), ``[]`` when written empty."""
    if node is None or is_null(node):
        return None
    if not isinstance(node, RawSeq):
        raise ctx.error(f"cannot unmarshal {_kind(node)} into a list of strings")
    return [as_str(item, ctx.index(i)) for i, item in enumerate(node.items)]


def as_seq(node: RawNode | None, ctx: Ctx) -> list[RawNode] | None:
    """A Go slice of structs: the raw items, ``None`` when absent/null."""
    if node is None or is_null(node):
        return None
    if not isinstance(node, RawSeq):
        raise ctx.error(f"cannot unmarshal {_kind(node)} into a list")
    return node.items


def as_fields(
    node: RawNode | None, ctx: Ctx, known: frozenset[str] | None, strict: bool, type_name: str
) -> dict[str, RawNode]:
    """A Go struct: its fields as raw nodes by key.

    ``strict`` mirrors yaml.v3 ``KnownFields(true)``: a key that is not in ``known`` is an
    error. Without it unknown keys are ignored, as AICR does for v1alpha2 overlays.
    """
    if node is None or is_null(node):
        return {}
    if not isinstance(node, RawMap):
        raise ctx.error(f"cannot unmarshal {_kind(node)} into {type_name}")
    out: dict[str, RawNode] = {}
    for key, value in effective_pairs(node):
        name = as_str(key, ctx)
        if strict and known is not None and name not in known:
            raise ctx.child(name).error(f"field {name} not found in type {type_name}")
        out[name] = value
    return out


def as_any(node: RawNode, ctx: Ctx, depth: int = 0) -> Any:
    """yaml.v3 decoding into ``interface{}``.

    Mappings whose keys all resolve to strings become ``dict[str, Any]`` (Go
    ``map[string]interface{}``); others keep typed keys (Go ``map[interface{}]interface{}``),
    which the override deep-merge treats as an opaque leaf, exactly like AICR.
    """
    if depth > MAX_DEPTH:
        raise ctx.error(f"nesting deeper than {MAX_DEPTH} levels")
    if isinstance(node, RawScalar):
        return scalar_value(node, ctx.where)
    if isinstance(node, RawSeq):
        return [as_any(item, ctx.index(i), depth + 1) for i, item in enumerate(node.items)]
    out: dict[Any, Any] = {}
    for key, value in effective_pairs(node):
        if not isinstance(key, RawScalar):
            raise ctx.error("complex (non-scalar) mapping keys are not supported")
        k = scalar_value(key, ctx.where)
        out[k] = as_any(value, ctx.child(str(k)), depth + 1)
    return out


def as_str_map(node: RawNode | None, ctx: Ctx) -> dict[str, Any] | None:
    """A Go ``map[string]any`` field (``overrides``): keys are the key text, values typed."""
    if node is None or is_null(node):
        return None
    if not isinstance(node, RawMap):
        raise ctx.error(f"cannot unmarshal {_kind(node)} into a map")
    out: dict[str, Any] = {}
    for key, value in effective_pairs(node):
        name = as_str(key, ctx)
        out[name] = as_any(value, ctx.child(name), 1)
    return out


def as_string_string_map(node: RawNode | None, ctx: Ctx) -> dict[str, str] | None:
    """A Go ``map[string]string`` field (``nodeSelection.selector``)."""
    if node is None or is_null(node):
        return None
    if not isinstance(node, RawMap):
        raise ctx.error(f"cannot unmarshal {_kind(node)} into a map of strings")
    return {as_str(k, ctx): as_str(v, ctx.child(as_str(k, ctx))) for k, v in effective_pairs(node)}
