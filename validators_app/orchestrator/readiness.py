"""Readiness constraints evaluated in process against the snapshot, as ``aicr validate`` does.

Port of AICR main-08 ``pkg/constraints`` (``ParseConstraintExpression``, ``Evaluate``,
``gpu_nodes.go``), ``pkg/measurement/path.go`` and ``pkg/version`` as described in
AICR-VALIDATE.md §3. The constraint set is the recipe's top-level ``constraints`` followed by
``validation.readiness.constraints``; the first failure stops the run with AICR's message.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ConstraintError",
    "ReadinessFailure",
    "Version",
    "check_readiness",
    "evaluate_constraint",
    "lookup",
    "parse_expression",
    "parse_version",
]

# Longest prefix first, as ParseConstraintExpression tries them.
_OPERATORS = (">=", "<=", "!=", "==", ">", "<")
_GPU_NODES_PATH = "NodeTopology.gpu-nodes.label"
_GPU_NODE_LABEL = "cloud.google.com/gke-accelerator"
_LABEL_KEY = re.compile(
    r"(?:[a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?\Z"
)


class ConstraintError(ValueError):
    """The constraint cannot be evaluated (bad expression, missing reading, unparsable version)."""


@dataclass(frozen=True)
class ReadinessFailure:
    """Why readiness stopped the run; ``message`` is AICR's text."""

    name: str
    message: str


@dataclass(frozen=True, order=True)
class Version:
    major: int
    minor: int
    patch: int
    precision: int  # how many components were written (1-3)


def parse_version(text: str) -> Version:
    """pkg/version: strip ``v``, cut extras at the first ``-``/``+`` after a digit, ≤3 ints."""
    s = text.strip()
    if s[:1] in ("v", "V"):
        s = s[1:]
    for i in range(1, len(s)):
        if s[i] in "-+" and s[i - 1].isdigit():
            s = s[:i]
            break
    parts = s.split(".")
    if not s or len(parts) > 3 or not all(p.isascii() and p.isdigit() for p in parts):
        raise ConstraintError(f"invalid version {text!r}")
    nums = [int(p) for p in parts] + [0] * (3 - len(parts))
    return Version(nums[0], nums[1], nums[2], len(parts))


def _compare(a: Version, b: Version, *, precision: int) -> int:
    left = (a.major, a.minor, a.patch)[:precision]
    right = (b.major, b.minor, b.patch)[:precision]
    return (left > right) - (left < right)


def _looks_like_version(value: str) -> bool:
    s = value[1:] if value[:1] in ("v", "V") else value
    return "." in s and any(c.isdigit() for c in s)


@dataclass(frozen=True)
class Expression:
    operator: str  # "" for exact string match
    value: str


def parse_expression(expr: str) -> Expression:
    """ParseConstraintExpression: trim, longest operator prefix, non-empty value."""
    s = expr.strip()
    if s.startswith("!") and not s.startswith("!="):
        raise ConstraintError(
            f"invalid constraint expression {expr!r}: bare '!' is not an operator"
        )
    for op in _OPERATORS:
        if s.startswith(op):
            value = s[len(op) :].strip()
            if not value:
                raise ConstraintError(f"invalid constraint expression {expr!r}: empty value")
            return Expression(op, value)
    if not s:
        raise ConstraintError("invalid constraint expression: empty value")
    return Expression("", s)


def evaluate_expression(expr: Expression, actual: str) -> bool:
    """ParsedConstraint.Evaluate; raises ConstraintError where AICR returns an error."""
    actual = actual.strip()
    if expr.operator == "":
        return actual == expr.value
    if expr.operator in ("==", "!=") and not _looks_like_version(expr.value):
        return (actual == expr.value) == (expr.operator == "==")
    try:
        want = parse_version(expr.value)
    except ConstraintError as exc:
        if expr.operator in ("==", "!="):
            return (actual == expr.value) == (expr.operator == "==")
        raise ConstraintError(f"cannot parse expected version: {exc}") from exc
    try:
        got = parse_version(actual)
    except ConstraintError as exc:
        if expr.operator in ("==", "!="):
            return (actual == expr.value) == (expr.operator == "==")
        raise ConstraintError(f"cannot parse actual version: {exc}") from exc
    if expr.operator in ("==", "!="):
        # Equality fills missing parts with 0: "== 1.33" is not "1.33.4".
        return (_compare(got, want, precision=3) == 0) == (expr.operator == "==")
    cmp = _compare(got, want, precision=min(got.precision, want.precision))
    return {">=": cmp >= 0, "<=": cmp <= 0, ">": cmp > 0, "<": cmp < 0}[expr.operator]


def _render(value: Any) -> str:
    """A reading as the string AICR compares (Go's fmt of the scalar)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _split_path(path: str) -> tuple[str, str, str]:
    mtype, sep, rest = path.partition(".")
    if not sep or not rest:
        raise ConstraintError(f"invalid measurement path {path!r}")
    if mtype == "SystemD":
        subtype, sep, key = rest.rpartition(".")
    else:
        subtype, sep, key = rest.partition(".")
    if not sep or not subtype or not key:
        raise ConstraintError(f"invalid measurement path {path!r}")
    return mtype, subtype, key


def _measurements(snapshot: object) -> Sequence[Mapping[str, Any]]:
    # The snapshot is what the cluster reported: any YAML, checked here.
    items = snapshot.get("measurements") if isinstance(snapshot, Mapping) else None
    return [m for m in items if isinstance(m, Mapping)] if isinstance(items, list) else []


def _subtype(snapshot: Mapping[str, Any], mtype: str, name: str) -> Mapping[str, Any] | None:
    # First measurement of that type, first subtype with that name (path.go).
    for m in _measurements(snapshot):
        if m.get("type") == mtype:
            for st in m.get("subtypes") or ():
                if isinstance(st, Mapping) and st.get("subtype") == name:
                    return st
            return None
    return None


def lookup(snapshot: Mapping[str, Any], path: str) -> str:
    """The reading at ``Type.Subtype.Key`` rendered as a string; ConstraintError if absent."""
    mtype, subtype, key = _split_path(path)
    st = _subtype(snapshot, mtype, subtype)
    data = st.get("data") if st is not None else None
    if not isinstance(data, Mapping) or key not in data or data[key] is None:
        raise ConstraintError(f"measurement {path} not found in snapshot")
    return _render(data[key])


def _node_names(
    ctx: Mapping[str, Any], data: Mapping[str, Any], folded: Mapping[str, Any]
) -> set[str]:
    """The nodes of one label reading: ``node-list``, or ``node-list-ref`` into the folded map
    (``value|name,name``). A truncated list cannot prove anything about every node: error."""
    if data.get("truncated") is not False:
        raise ConstraintError(f"node list of label {ctx.get('key')} is truncated or incomplete")
    if "node-list" in data:
        text = str(data.get("node-list") or "")
    elif isinstance(data.get("node-list-ref"), str) and data["node-list-ref"] in folded:
        _value, sep, text = str(folded[data["node-list-ref"]]).partition("|")
        if not sep or " (+" in text:
            raise ConstraintError(f"node list of label {ctx.get('key')} is truncated")
    else:
        raise ConstraintError(f"label {ctx.get('key')} has no node list")
    return {n for n in text.split(",") if n}


def _gpu_nodes_label(snapshot: Mapping[str, Any], value: str) -> tuple[bool, str]:
    """``NodeTopology.gpu-nodes.label``: every GPU node must match ``key=value`` / ``!key``.

    GPU nodes are the nodes carrying ``cloud.google.com/gke-accelerator``. Fails closed (error)
    on an empty universe, truncated node lists or readings without the lossless ``items``.
    """
    want = value.strip()
    negate = want.startswith("!")
    key, _, label_value = (want[1:] if negate else want).partition("=")
    if not key or not _LABEL_KEY.match(key) or (negate and "=" in want):
        raise ConstraintError(f"invalid label expression {value!r}")
    st = _subtype(snapshot, "NodeTopology", "label")
    items = st.get("items") if st is not None else None
    found = st.get("data") if st is not None else None
    folded: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    if not isinstance(items, list):
        raise ConstraintError("NodeTopology.label readings not found in snapshot")
    nodes_by_label: dict[tuple[str, str], set[str]] = {}
    for item in items:
        ctx, data = (
            (item.get("context"), item.get("data")) if isinstance(item, Mapping) else (None, None)
        )
        if not isinstance(ctx, Mapping) or not isinstance(data, Mapping):
            raise ConstraintError("malformed NodeTopology.label item")
        names = _node_names(ctx, data, folded)
        nodes_by_label[(str(ctx.get("key")), _render(ctx.get("value", "")))] = names
    universe = set().union(*(n for (k, _v), n in nodes_by_label.items() if k == _GPU_NODE_LABEL))
    if not universe:
        raise ConstraintError("no GPU nodes in snapshot")
    labelled = set().union(
        *(n for (k, v), n in nodes_by_label.items() if k == key and (negate or v == label_value))
    )
    offenders = sorted(universe & labelled) if negate else sorted(universe - labelled)
    if offenders:
        return False, ",".join(offenders)
    return True, f"{len(universe)} GPU node(s)"


def evaluate_constraint(snapshot: Mapping[str, Any], name: str, value: str) -> tuple[bool, str]:
    """``(satisfied, actual)``; raises ConstraintError when AICR cannot evaluate it."""
    if name == _GPU_NODES_PATH:
        return _gpu_nodes_label(snapshot, value)
    expr = parse_expression(value)
    actual = lookup(snapshot, name)
    return evaluate_expression(expr, actual), actual


def readiness_constraints(recipe: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Top-level ``constraints`` then ``validation.readiness.constraints``, in order."""
    validation = recipe.get("validation") or {}
    readiness = validation.get("readiness") or {} if isinstance(validation, Mapping) else {}
    out: list[Mapping[str, Any]] = []
    for group in (
        recipe.get("constraints"),
        readiness.get("constraints") if isinstance(readiness, Mapping) else None,
    ):
        out.extend(c for c in group or () if isinstance(c, Mapping))
    return out


def check_readiness(
    recipe: Mapping[str, Any], snapshot: Mapping[str, Any] | None
) -> ReadinessFailure | None:
    """checkReadiness: the first failing constraint with AICR's message, or None."""
    constraints: Iterable[Mapping[str, Any]] = readiness_constraints(recipe)
    for c in constraints:
        name, value = str(c.get("name", "")), _render(c.get("value", ""))
        if snapshot is None:
            return ReadinessFailure(
                name, f"readiness check could not evaluate: {name}: no snapshot"
            )
        try:
            ok, actual = evaluate_constraint(snapshot, name, value)
        except ConstraintError as exc:
            return ReadinessFailure(name, f"readiness check could not evaluate: {name}: {exc}")
        if not ok:
            message = f"readiness check failed: {name} expected {value}, got {actual}"
            remediation = c.get("remediation")
            if remediation:
                message += "\n" + str(remediation)
            return ReadinessFailure(name, message)
    return None
