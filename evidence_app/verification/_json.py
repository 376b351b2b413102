"""Bounded JSON decoding shared by every parser in this package.

Untrusted documents (bundles, statements, manifests, CTRF reports, trusted roots) are decoded with
hard limits: total size, nesting depth, members per object, total number of values, length of a
number literal, and no duplicate keys (two parsers that keep different duplicates would disagree
about what was signed). ``NaN``/``Infinity`` are rejected.
"""

from __future__ import annotations

import json
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
    return document


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
