"""Bounded JSON decoding shared by every parser in this package.

Untrusted documents (bundles, statements, manifests, CTRF reports, trusted roots) are decoded with
hard limits: total size, nesting depth, members per object, total number of values, length of a
number literal, and no duplicate keys (two parsers that keep different duplicates would disagree
about what was signed). ``NaN``/``Infinity`` are rejected, and so is text no database column can
hold: a NUL character (PostgreSQL text and jsonb refuse U+0000) or an unpaired surrogate (not
UTF-8 at all) anywhere in a key or a string, named by its path (``unstorable_text``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any


class JSONLimitError(ValueError):
    """The document is not JSON, or breaks one of the limits."""


@dataclass(frozen=True)
class JSONLimits:
    max_bytes: int = 1_000_000
    max_depth: int = 64
    max_object_keys: int = 1_000
    max_values: int = 100_000
    max_number_chars: int = 40


DEFAULT_LIMITS = JSONLimits()


def _reject_constant(name: str) -> Any:
    raise JSONLimitError(f"non-standard number {name}")


def load_json(data: bytes | str, *, what: str, limits: JSONLimits = DEFAULT_LIMITS) -> Any:
    """Decode ``data`` as JSON within ``limits``; errors are ``JSONLimitError`` naming ``what``."""
    if isinstance(data, str):
        size = len(data.encode("utf-8", "surrogatepass"))
        text = data
    else:
        size = len(data)
        if size > limits.max_bytes:
            raise JSONLimitError(f"{what}: {size} bytes exceeds the limit of {limits.max_bytes}")
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JSONLimitError(f"{what}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    if size > limits.max_bytes:
        raise JSONLimitError(f"{what}: {size} bytes exceeds the limit of {limits.max_bytes}")
    if text.startswith("\ufeff"):
        raise JSONLimitError(f"{what}: byte order mark before the JSON document")

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        if len(pairs) > limits.max_object_keys:
            raise JSONLimitError(
                f"{what}: an object has {len(pairs)} keys (limit {limits.max_object_keys})"
            )
        result: dict[str, Any] = {}
        for key, value in pairs:
            if key in result:
                raise JSONLimitError(f"{what}: duplicate key {key[:64]!r}")
            result[key] = value
        return result

    def parse_int(literal: str) -> int:
        if len(literal) > limits.max_number_chars:
            raise JSONLimitError(f"{what}: number literal of {len(literal)} characters")
        return int(literal)

    def parse_float(literal: str) -> float:
        if len(literal) > limits.max_number_chars:
            raise JSONLimitError(f"{what}: number literal of {len(literal)} characters")
        value = float(literal)
        if value in (float("inf"), float("-inf")):
            raise JSONLimitError(f"{what}: number {literal[:20]} is out of range")
        return value

    try:
        document = json.loads(
            text,
            object_pairs_hook=pairs_hook,
            parse_int=parse_int,
            parse_float=parse_float,
            parse_constant=_reject_constant,
        )
    except JSONLimitError as exc:
        if str(exc).startswith(what):
            raise
        raise JSONLimitError(f"{what}: {exc}") from None
    except RecursionError:
        raise JSONLimitError(f"{what}: nesting deeper than {limits.max_depth} levels") from None
    except json.JSONDecodeError as exc:
        raise JSONLimitError(
            f"{what}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    except ValueError as exc:  # e.g. int() digit limits
        raise JSONLimitError(f"{what}: not valid JSON ({exc})") from None
    _check_shape(document, what=what, limits=limits)
    if _MAYBE_UNSTORABLE.search(text):
        problem = unstorable_text(document, what=what)
        if problem is not None:
            raise JSONLimitError(problem)
    return document


# Cheap pre-check on the JSON text: the escapes (or raw characters) that decode to NUL or to a
# surrogate; only then is the document walked (a paired surrogate escape decodes to one good
# character and passes the walk).
_MAYBE_UNSTORABLE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])|[\x00\ud800-\udfff]")
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _describe(char: str) -> str:
    if char == "\x00":
        return "a NUL character (U+0000)"
    return f"an unpaired surrogate (U+{ord(char):04X})"


def unstorable_text(value: Any, *, what: str) -> str | None:
    """Why ``value`` (decoded JSON, or any str/dict/list of them) cannot be stored as text —
    ``"{what}: predicate.phases.deployment.message contains a NUL character (U+0000)…"`` —
    or ``None`` when every key and string can."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        node, path = stack.pop()
        if type(node) is str:
            found = _UNSTORABLE.search(node)
            if found is not None:
                where = path or "the value"
                return (
                    f"{what}: {where} contains {_describe(found.group())}, which cannot be "
                    "stored as text"
                )
        elif type(node) is dict:
            for key, child in node.items():
                key_text = str(key)
                found = _UNSTORABLE.search(key_text)
                if found is not None:
                    return (
                        f"{what}: a key in {path or 'the document'} contains "
                        f"{_describe(found.group())}, which cannot be stored as text"
                    )
                stack.append((child, f"{path}.{key_text}" if path else key_text))
        elif type(node) in (list, tuple):
            stack.extend((child, f"{path}[{i}]") for i, child in enumerate(node))
    return None


def storable(value: Any) -> Any:
    """``value`` with every NUL and unpaired surrogate in its strings (and keys) written as an
    escape (``\\x00``, ``\\ud800``): for the upload log, which records refused input."""
    if isinstance(value, str):
        if _UNSTORABLE.search(value) is None:
            return value
        return value.replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode()
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable(v) for v in value]
    return value


def _check_shape(document: Any, *, what: str, limits: JSONLimits) -> None:
    """Iteratively check nesting depth and the total number of values (containers only are
    walked; scalars are counted through their container's length)."""
    if type(document) not in (dict, list):
        return
    stack: list[tuple[Any, int]] = [(document, 1)]
    values = 1
    while stack:
        node, depth = stack.pop()
        if depth > limits.max_depth:
            raise JSONLimitError(f"{what}: nesting deeper than {limits.max_depth} levels")
        children = node.values() if type(node) is dict else node
        values += len(node)
        if values > limits.max_values:
            raise JSONLimitError(f"{what}: more than {limits.max_values} values")
        for child in children:
            if type(child) is dict or type(child) is list:
                stack.append((child, depth + 1))
