"""JSON the way Go's ``encoding/json`` reads and writes it.

Reading: ``meta.json`` and CTRF files are contributor-supplied, and Go decodes them into typed
structs, so a value of the wrong JSON type aborts generation where Python would happily carry
a number as a recipe name. ``decode`` checks each declared field's type, matches object keys
case-insensitively like Go (exact name first, then folded), treats ``null`` as "leave the
zero value", ignores undeclared keys, and rejects ``NaN``/``Infinity``.

Writing: ``marshal`` reproduces ``json.Marshal(v)`` (compact) and ``marshal_indent``
``json.MarshalIndent(v, "", "  ")``, byte for byte: two-space indent (indented form),
``<``/``>``/``&`` and U+2028/U+2029 escaped, short escapes for ``\\b \\f \\n \\r \\t``,
lowercase ``\\u00xx`` for other control characters, and lone surrogates replaced by U+FFFD.
Objects keep the insertion order of the dicts given, so
callers build struct fields in declared order and sort map keys themselves.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class JSONTypeError(ValueError):
    """The document is not valid JSON or a value does not fit its declared Go type."""


# --- type descriptors ----------------------------------------------------------------------

STRING = "string"
BOOL = "bool"
INT64 = "int64"


@dataclass(frozen=True)
class ListOf:
    item: Any


@dataclass(frozen=True)
class MapOf:
    value: Any


@dataclass(frozen=True)
class Ptr:
    target: Any


@dataclass(frozen=True)
class Struct:
    fields: tuple[tuple[str, Any], ...]


def _fold(name: str) -> str:
    # Go's foldName: ASCII upper-cased, other runes ToUpper(ToLower(r)) by *simple* case
    # mapping (a full mapping such as "ß" -> "SS" must not make "claß" match "class").
    out = []
    for ch in name:
        if ch < "\x80":
            out.append(ch.upper())
            continue
        folded = ch.lower().upper()
        out.append(folded if len(folded) == 1 else ch)
    return "".join(out)


def _zero(typ: Any) -> Any:
    if typ == STRING:
        return ""
    if typ == BOOL:
        return False
    if typ == INT64:
        return 0
    if isinstance(typ, ListOf):
        return []
    if isinstance(typ, MapOf):
        return {}
    if isinstance(typ, Ptr):
        return None
    if isinstance(typ, Struct):
        return {name: _zero(t) for name, t in typ.fields}
    raise TypeError(typ)


class _Obj(list):
    """A JSON object as its ordered key/value pairs (duplicates kept, last one wins)."""


def _reject_constant(name: str) -> Any:
    raise JSONTypeError(f"invalid JSON literal {name}")


def _convert(value: Any, typ: Any, current: Any, path: str) -> Any:
    if value is None:
        # null leaves a non-pointer field unchanged and clears a pointer.
        return None if isinstance(typ, Ptr) else current
    if isinstance(typ, Ptr):
        return _convert(value, typ.target, _zero(typ.target), path)
    if typ == STRING:
        if not isinstance(value, str):
            raise JSONTypeError(f"{path}: want string")
        return value
    if typ == BOOL:
        if not isinstance(value, bool):
            raise JSONTypeError(f"{path}: want bool")
        return value
    if typ == INT64:
        if isinstance(value, bool) or not isinstance(value, int):
            raise JSONTypeError(f"{path}: want integer")
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise JSONTypeError(f"{path}: integer out of range")
        return value
    if isinstance(typ, ListOf):
        if not isinstance(value, list):
            raise JSONTypeError(f"{path}: want array")
        return [_convert(v, typ.item, _zero(typ.item), f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(typ, MapOf):
        if not isinstance(value, _Obj):
            raise JSONTypeError(f"{path}: want object")
        out = dict(current) if isinstance(current, dict) else {}
        for k, v in value:
            out[k] = _convert(v, typ.value, out.get(k, _zero(typ.value)), f"{path}.{k}")
        return out
    if isinstance(typ, Struct):
        if not isinstance(value, _Obj):
            raise JSONTypeError(f"{path}: want object")
        out = dict(current)
        exact = {name: t for name, t in typ.fields}
        folded: dict[str, str] = {}
        for name, _t in typ.fields:
            folded.setdefault(_fold(name), name)
        for k, v in value:
            field = k if k in exact else folded.get(_fold(k))
            if field is None:
                continue  # undeclared keys are ignored, as in Go
            out[field] = _convert(v, exact[field], out[field], f"{path}.{field}")
        return out
    raise TypeError(typ)


def decode(data: bytes, typ: Any) -> Any:
    """Decode ``data`` into the zero-filled shape of ``typ`` (raises ``JSONTypeError``)."""
    # Go substitutes U+FFFD for invalid UTF-8 inside strings; outside strings the
    # replacement character is a syntax error either way.
    text = data.decode("utf-8", errors="replace")
    try:
        value = json.loads(text, object_pairs_hook=_Obj, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise JSONTypeError(f"invalid JSON: {exc}") from exc
    return _convert(value, typ, _zero(typ), "$")


# --- encoding -------------------------------------------------------------------------------

_HEX = "0123456789abcdef"
_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _quote(s: str) -> str:
    out = ['"']
    for ch in s:
        if ch in _SHORT:
            out.append(_SHORT[ch])
        elif ch < " " or ch in "<>&":
            o = ord(ch)
            out.append("\\u00" + _HEX[o >> 4] + _HEX[o & 0xF])
        elif ch in "\u2028\u2029":
            out.append(f"\\u{ord(ch):04x}")
        elif "\ud800" <= ch <= "\udfff":
            out.append("\ufffd")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _encode(value: Any, indent: str, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, str):
        out.append(_quote(value))
    elif isinstance(value, Mapping):
        if not value:
            out.append("{}")
            return
        inner = indent + "  "
        out.append("{")
        for i, (k, v) in enumerate(value.items()):
            out.append(("," if i else "") + "\n" + inner + _quote(k) + ": ")
            _encode(v, inner, out)
        out.append("\n" + indent + "}")
    elif isinstance(value, Sequence):
        if not value:
            out.append("[]")
            return
        inner = indent + "  "
        out.append("[")
        for i, v in enumerate(value):
            out.append(("," if i else "") + "\n" + inner)
            _encode(v, inner, out)
        out.append("\n" + indent + "]")
    else:
        raise TypeError(f"cannot encode {type(value).__name__}")


def _encode_compact(value: Any, out: list[str]) -> None:
    if isinstance(value, Mapping):
        out.append("{")
        for i, (k, v) in enumerate(value.items()):
            out.append(("," if i else "") + _quote(k) + ":")
            _encode_compact(v, out)
        out.append("}")
    elif isinstance(value, Sequence) and not isinstance(value, str):
        out.append("[")
        for i, v in enumerate(value):
            if i:
                out.append(",")
            _encode_compact(v, out)
        out.append("]")
    else:
        _encode(value, "", out)


def marshal(value: Any) -> bytes:
    """``json.Marshal(value)``: compact, no trailing newline (AICR's ``statement.intoto.json``)."""
    out: list[str] = []
    _encode_compact(value, out)
    return "".join(out).encode("utf-8")


def marshal_indent(value: Any) -> bytes:
    """``json.MarshalIndent(value, "", "  ")`` followed by the writer's trailing newline."""
    out: list[str] = []
    _encode(value, "", out)
    out.append("\n")
    return "".join(out).encode("utf-8")
