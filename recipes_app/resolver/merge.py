"""Overlay merging and deployment ordering (main-08 ``metadata.go`` / ``validation.go``).

``MergedSpec`` is the working state of one resolution. It starts as a copy of the base spec
and every overlay in every surviving chain, then every mixin, is merged into it with AICR's
``RecipeMetadataSpec.Merge`` semantics:

- constraints keyed by name, later wins, re-sorted by name on every merge;
- componentRefs keyed by name, an existing entry merged field by field
  (``merge_component_ref``), a new one appended, re-sorted by name on every merge;
- validation merged per phase (``merge_phase``): ``checks``/``constraints`` absent = inherit,
  ``[]`` = clear, otherwise an ordered union where an overlay constraint with an inherited name
  takes the inherited position;
- mixin names accumulated (de-duplicated, order kept).

The catalog's objects are never mutated: merged component refs are new frozen objects and
override dicts are merged copy-on-write (``profile.deep_merge``), sharing untouched subtrees.
(AICR's Go merge writes into the overlay's cached override map when a component first declared
by one overlay is refined by a later one; this port deliberately does not reproduce that
aliasing, and the goldens agree.)
"""

from __future__ import annotations

from dataclasses import replace
from operator import attrgetter
from typing import Any

from .errors import ResolutionError, goq
from .model import (
    COMPONENT_TYPE_HELM,
    COMPONENT_TYPE_KUSTOMIZE,
    ComponentRef,
    Constraint,
    NodeSelection,
    ValidationConfig,
    ValidationPhase,
)
from .profile import deep_merge

_by_name = attrgetter("name")


class MergedSpec:
    """Mutable working copy of a ``RecipeMetadataSpec`` during one resolution."""

    __slots__ = ("constraints", "mixins", "refs", "validation")

    def __init__(
        self,
        constraints: list[Constraint],
        refs: list[ComponentRef],
        validation: ValidationConfig | None,
    ) -> None:
        self.constraints = constraints
        self.refs = refs
        self.validation = validation
        self.mixins: list[str] = []

    def merge(
        self,
        constraints: tuple[Constraint, ...] | None,
        refs: tuple[ComponentRef, ...] | None,
        validation: ValidationConfig | None = None,
        mixins: tuple[str, ...] | None = None,
    ) -> None:
        """``RecipeMetadataSpec.Merge(other)``."""
        cmap = {c.name: c for c in self.constraints}
        if constraints:
            for c in constraints:
                cmap[c.name] = c
        self.constraints = sorted(cmap.values(), key=_by_name)

        rmap = {r.name: r for r in self.refs}
        if refs:
            for ov in refs:
                base = rmap.get(ov.name)
                rmap[ov.name] = ov if base is None else merge_component_ref(base, ov)
        self.refs = sorted(rmap.values(), key=_by_name)

        if validation is not None:
            if self.validation is None:
                self.validation = validation  # frozen: sharing is cloning
            else:
                v = self.validation
                self.validation = ValidationConfig(
                    readiness=merge_phase(v.readiness, validation.readiness),
                    deployment=merge_phase(v.deployment, validation.deployment),
                    performance=merge_phase(v.performance, validation.performance),
                    conformance=merge_phase(v.conformance, validation.conformance),
                )

        if mixins:
            seen = set(self.mixins)
            for m in mixins:
                if m not in seen:
                    self.mixins.append(m)
                    seen.add(m)


def _union(base: tuple[str, ...] | None, extra: tuple[str, ...]) -> tuple[str, ...]:
    out = list(base or ())
    seen = set(out)
    for item in extra:
        if item not in seen:
            out.append(item)
            seen.add(item)
    return tuple(out)


def merge_component_ref(base: ComponentRef, ov: ComponentRef) -> ComponentRef:
    """``mergeComponentRef``: non-empty overlay scalars win, lists per AICR's rules."""
    changes: dict[str, Any] = {}
    for attr in ("namespace", "chart", "type", "source", "version", "tag", "values_file", "path"):
        value = getattr(ov, attr)
        if value:
            changes[attr] = value
    if ov.overrides:
        changes["overrides"] = deep_merge(base.overrides, ov.overrides)
    if ov.patches:
        changes["patches"] = ov.patches
    if ov.dependency_refs:
        changes["dependency_refs"] = _union(base.dependency_refs, ov.dependency_refs)
    if ov.manifest_files:
        changes["manifest_files"] = _union(base.manifest_files, ov.manifest_files)
    if ov.pre_manifest_files:
        changes["pre_manifest_files"] = _union(base.pre_manifest_files, ov.pre_manifest_files)
    if ov.cleanup:
        changes["cleanup"] = True
    if ov.expected_resources:
        changes["expected_resources"] = ov.expected_resources
    if ov.health_check_asserts:
        changes["health_check_asserts"] = ov.health_check_asserts
    if ov.health_check_skip:
        changes["health_check_skip"] = True
    return replace(base, **changes) if changes else base


def merge_phase(base: ValidationPhase | None, ov: ValidationPhase | None) -> ValidationPhase | None:
    """``mergeValidationPhase``: field-wise merge of one validation phase."""
    if ov is None:
        return base
    if base is None:
        return ov
    checks: tuple[str, ...] | None = None
    if ov.checks is not None and len(ov.checks) == 0:
        checks = ()
    elif len(base.checks or ()) + len(ov.checks or ()) > 0:
        checks = _union(tuple(dict.fromkeys(base.checks or ())), ov.checks or ())

    constraints: tuple[Constraint, ...] | None = None
    if ov.constraints is not None and len(ov.constraints) == 0:
        constraints = ()
    elif len(base.constraints or ()) + len(ov.constraints or ()) > 0:
        by_name = {c.name: c for c in ov.constraints or ()}
        seen: set[str] = set()
        out: list[Constraint] = []
        for c in base.constraints or ():
            if c.name in seen:
                continue
            seen.add(c.name)
            out.append(by_name.get(c.name, c))
        for c in ov.constraints or ():
            if c.name in seen:
                continue
            seen.add(c.name)
            out.append(by_name[c.name])
        constraints = tuple(out)

    node_selection: NodeSelection | None = ov.node_selection or base.node_selection
    return ValidationPhase(
        timeout=ov.timeout or base.timeout,
        constraints=constraints,
        checks=checks,
        node_selection=node_selection,
        infrastructure=ov.infrastructure or base.infrastructure,
    )


# --- finalize ----------------------------------------------------------------------------------


def validate_dependencies(refs: list[ComponentRef]) -> None:
    """``ValidateDependencies``: every dependency is declared, and the graph has no cycle."""
    known = {r.name for r in refs}
    for r in refs:
        for dep in r.dependency_refs or ():
            if dep not in known:
                raise ResolutionError(
                    "merged recipe validation failed: [INVALID_REQUEST] "
                    f"component {goq(r.name)} references unknown dependency {goq(dep)}"
                )
    cycle = find_cycle([(r.name, r.dependency_refs or ()) for r in refs])
    if cycle:
        raise ResolutionError(
            "merged recipe validation failed: [INVALID_REQUEST] dependency validation failed: "
            f"[INVALID_REQUEST] circular dependency detected: [{' '.join(cycle)}]"
        )


def find_cycle(graph: list[tuple[str, tuple[str, ...] | list[str]]]) -> list[str] | None:
    """AICR ``detectCycles`` (DFS in declaration order); the cycle path, first node repeated.

    Iterative so a hostile chain of dependencies cannot exhaust Python's recursion limit.
    """
    deps = {name: tuple(d) for name, d in graph}
    visited: set[str] = set()
    on_stack: set[str] = set()
    for start, _ in graph:
        if start in visited:
            continue
        path: list[str] = [start]
        iters = [iter(deps.get(start, ()))]
        visited.add(start)
        on_stack.add(start)
        while iters:
            nxt = next(iters[-1], None)
            if nxt is None:
                iters.pop()
                on_stack.discard(path.pop())
                continue
            if nxt not in visited:
                visited.add(nxt)
                on_stack.add(nxt)
                path.append(nxt)
                iters.append(iter(deps.get(nxt, ())))
            elif nxt in on_stack:
                return [*path[path.index(nxt) :], nxt]
    return None


def topological_sort(refs: list[ComponentRef]) -> list[str]:
    """``TopologicalSort``: Kahn's algorithm over enabled components, queue kept sorted.

    Disabled components (``overrides.enabled: false``) are left out, and an edge to a declared
    but disabled component counts as satisfied.
    """
    declared = {r.name for r in refs}
    enabled = {r.name for r in refs if r.is_enabled()}
    in_degree: dict[str, int] = {}
    dependents: dict[str, list[str]] = {}
    for r in refs:
        if r.name not in enabled:
            continue
        degree = 0
        for dep in r.dependency_refs or ():
            if dep in declared and dep not in enabled:
                continue
            degree += 1
            dependents.setdefault(dep, []).append(r.name)
        in_degree[r.name] = degree
    queue = sorted(name for name, d in in_degree.items() if d == 0)
    order: list[str] = []
    while queue:
        node = queue.pop(0)
        order.append(node)
        added = False
        for dep in dependents.get(node, ()):
            in_degree[dep] -= 1
            if in_degree[dep] == 0:
                queue.append(dep)
                added = True
        if added:
            queue.sort()
    if len(order) != len(enabled):
        raise ResolutionError(
            "failed to compute deployment order: [INVALID_REQUEST] cannot determine deployment "
            "order: circular dependencies exist",
            code="INTERNAL",
        )
    return order


def canonical_type(value: str) -> str:
    """``canonicalizeComponentTypes``: case-insensitive Helm/Kustomize to the canonical spelling."""
    low = value.lower()
    if low == "helm":
        return COMPONENT_TYPE_HELM
    if low == "kustomize":
        return COMPONENT_TYPE_KUSTOMIZE
    return value
