"""Query guards around overlay selection (main-08 ``metadata_store.go`` / ``coverage.go``).

Two checks reject queries whose stated criteria the catalog cannot honour, instead of silently
returning a more generic recipe:

- ``require_os_if_needed`` (step 4): a query names a service but no OS, no matched overlay
  carries that exact service+accelerator pair, yet OS-gated overlays would match with some OS
  ⇒ "specify an OS".
- ``verify_criteria_coverage`` (step 9, #1542): every stated dimension must be carried by at
  least one applied overlay; otherwise the error lists, per uncovered dimension, the minimal
  *completion tuples* (extra criteria that would make some overlay carry it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .criteria import ANY, DIMENSIONS, Criteria, is_specified
from .errors import ResolutionError

if TYPE_CHECKING:
    from .catalog import Catalog
    from .model import Overlay


def available_os(catalog: Catalog, query: Criteria) -> list[str]:
    """OS values of OS-gated overlays that would match if the query carried that OS."""
    seen: set[str] = set()
    for o in catalog.matchable:
        c = o.criteria
        assert c is not None
        if c.os in ("", ANY):
            continue
        probe = Criteria(query.service, query.accelerator, query.intent, c.os, query.platform)
        if c.matches(probe):
            seen.add(c.os)
    return sorted(seen)


def require_os_if_needed(
    catalog: Catalog, query: Criteria, matched: list[Overlay], *, joint: bool = False
) -> None:
    """``requireOSIfNeeded``: the joint service+accelerator OS gate. ``joint`` (AICR v0.20+,
    PR #2322): the same refusal in the coverage rule's shape — ``uncovered: [os]`` with its
    ``validCompletions`` and "specify os (valid: …)" — instead of ``requiresOS``. Only those
    names are known offline (AICR-V1.md §4); the clause before them is v0.19's."""
    if query.service in (ANY, "") or query.os not in (ANY, ""):
        return
    accel = "" if query.accelerator == ANY else query.accelerator
    for o in matched:
        c = o.criteria
        if c is None or c.service != query.service:
            continue
        if ("" if c.accelerator == ANY else c.accelerator) == accel:
            return
    valid = available_os(catalog, query)
    if valid and joint:
        raise ResolutionError(
            f"service '{query.service}' has no OS-agnostic recipe for accelerator '{accel}'; "
            f"specify os (valid: {', '.join(valid)})",
            uncovered=["os"],
            valid_completions={"os": [tuple_key({"os": os}) for os in valid]},
        )
    if valid:
        raise ResolutionError(
            f"service '{query.service}' has no OS-agnostic recipe for accelerator '{accel}'; "
            f"specify an OS (valid: {', '.join(valid)})",
            requires_os=True,
        )


def uncovered_dimensions(catalog: Catalog, query: Criteria, applied: list[str]) -> list[str]:
    """Stated dimensions no applied overlay carries (exact value)."""
    out: list[str] = []
    applied_criteria = []
    for name in applied:
        o = catalog.overlay(name)
        if o is not None and o.criteria is not None:
            applied_criteria.append(o.criteria)
    for dim in DIMENSIONS:
        want = query.dim(dim)
        if not is_specified(want):
            continue
        if not any(c.dim(dim) == want for c in applied_criteria):
            out.append(dim)
    return out


def tuple_key(t: dict[str, str]) -> str:
    """``service=eks, accelerator=h100, ...`` in dimension order."""
    return ", ".join(f"{d}={t[d]}" for d in DIMENSIONS if d in t)


def _completion_tuple(query: Criteria, oc: Criteria, dim: str, want: str) -> dict[str, str] | None:
    t: dict[str, str] = {}
    carries = False
    for d in DIMENSIONS:
        ov = oc.dim(d)
        if d == dim:
            if ov != want:
                return None
            carries = True
            continue
        if not is_specified(ov):
            continue
        qv = query.dim(d)
        if is_specified(qv):
            if qv != ov:
                return None
            continue
        t[d] = ov
    return t if carries else None


def completion_tuples(
    catalog: Catalog, query: Criteria, dim: str, want: str
) -> list[dict[str, str]]:
    """Minimal completion tuples for one uncovered dimension, sorted (size, then text)."""
    uniq: dict[str, dict[str, str]] = {}
    for o in catalog.matchable:
        assert o.criteria is not None
        t = _completion_tuple(query, o.criteria, dim, want)
        if t:
            uniq[tuple_key(t)] = t
    out = []
    for key, t in uniq.items():
        minimal = True
        for other_key, u in uniq.items():
            if other_key != key and len(u) < len(t) and all(t.get(k) == v for k, v in u.items()):
                minimal = False
                break
        if minimal:
            out.append(t)
    out.sort(key=lambda t: (len(t), tuple_key(t)))
    return out


def _clause(query: Criteria, dim: str, want: str, tuples: list[dict[str, str]]) -> str:
    stated = str(query)
    if not tuples:
        return f"no recipe provides {dim} '{want}' for {stated}"
    if all(len(t) == 1 for t in tuples) and len({next(iter(t)) for t in tuples}) == 1:
        key = next(iter(tuples[0]))
        values = sorted(next(iter(t.values())) for t in tuples)
        return f"{dim} '{want}' for {stated} requires {key} (valid: {', '.join(values)})"
    rendered = ", ".join(f"({tuple_key(t)})" for t in tuples)
    return f"{dim} '{want}' requires additional criteria; supported combinations: {rendered}"


def verify_criteria_coverage(catalog: Catalog, query: Criteria, applied: list[str]) -> None:
    """``verifyCriteriaCoverage`` (query mode: nothing is excluded by constraints)."""
    uncovered = uncovered_dimensions(catalog, query, applied)
    if not uncovered:
        return
    clauses = []
    completions: dict[str, list[str]] = {}
    for dim in uncovered:
        want = query.dim(dim)
        tuples = completion_tuples(catalog, query, dim, want)
        clauses.append(_clause(query, dim, want, tuples))
        completions[dim] = [tuple_key(t) for t in tuples]
    raise ResolutionError("; ".join(clauses), uncovered=uncovered, valid_completions=completions)
