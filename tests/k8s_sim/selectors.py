"""Kubernetes label and field selectors, parsed the way the API server parses them.

Label selectors: ``k=v``, ``k==v``, ``k!=v``, ``k``, ``!k``, ``k in (a,b)``, ``k notin (a,b)``,
comma-separated (all must match). Field selectors: ``path=v``, ``path==v``, ``path!=v`` over
dotted object paths (``metadata.name``, ``spec.nodeName``, ``status.phase``).
A malformed selector raises ``ValueError`` (the server answers 400 BadRequest).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

Matcher = Callable[[Mapping[str, Any]], bool]

_SET_EXPR = re.compile(r"^\s*(!?)([A-Za-z0-9._/-]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
_KEY = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._/-]*[A-Za-z0-9])?$")


def _split_terms(selector: str) -> list[str]:
    """Split on commas that are not inside a ``(…)`` value set."""
    terms, depth, current = [], 0, []
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(char)
    terms.append("".join(current))
    return [term.strip() for term in terms if term.strip()]


def _label_term(term: str) -> Callable[[Mapping[str, str]], bool]:
    if match := _SET_EXPR.match(term):
        if match.group(1):
            raise ValueError(f"invalid label selector term {term!r}")
        key, op = match.group(2), match.group(3)
        values = {value.strip() for value in match.group(4).split(",") if value.strip()}
        if op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    for op in ("!=", "==", "="):
        if op in term:
            key, _, value = term.partition(op)
            key, value = key.strip(), value.strip()
            if not _KEY.match(key):
                raise ValueError(f"invalid label key {key!r}")
            if op == "!=":
                return lambda labels: labels.get(key) != value
            return lambda labels: labels.get(key) == value
    if term.startswith("!"):
        key = term[1:].strip()
        if not _KEY.match(key):
            raise ValueError(f"invalid label key {key!r}")
        return lambda labels: key not in labels
    if not _KEY.match(term):
        raise ValueError(f"invalid label selector term {term!r}")
    return lambda labels: term in labels


def label_matcher(selector: str | None) -> Matcher:
    terms = [_label_term(term) for term in _split_terms(selector or "")]

    def matches(obj: Mapping[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(term(labels) for term in terms)

    return matches


def field_value(obj: Mapping[str, Any], path: str) -> str:
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, Mapping):
            return ""
        current = current.get(part)
    if current is None:
        return ""
    if isinstance(current, bool):
        return "true" if current else "false"
    return str(current)


def field_matcher(selector: str | None, supported: frozenset[str]) -> Matcher:
    checks: list[tuple[str, bool, str]] = []
    for term in _split_terms(selector or ""):
        for op in ("!=", "==", "="):
            if op in term:
                path, _, value = term.partition(op)
                path = path.strip()
                if path not in supported:
                    # The real server's message for an unsupported field label.
                    raise ValueError(f"field label not supported: {path}")
                checks.append((path, op == "!=", value.strip()))
                break
        else:
            raise ValueError(f"invalid field selector term {term!r}")

    def matches(obj: Mapping[str, Any]) -> bool:
        return all((field_value(obj, path) == value) != negate for path, negate, value in checks)

    return matches


def set_based_match_labels(selector: Mapping[str, Any]) -> Matcher:
    """A metav1.LabelSelector (``matchLabels`` + ``matchExpressions``) as a matcher."""
    terms = [f"{key}={value}" for key, value in (selector.get("matchLabels") or {}).items()]
    for expr in selector.get("matchExpressions") or []:
        op, key, values = expr.get("operator"), expr.get("key"), expr.get("values") or []
        if op == "In":
            terms.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            terms.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            terms.append(key)
        elif op == "DoesNotExist":
            terms.append(f"!{key}")
    return label_matcher(",".join(terms))
