"""Configuration profiles (ADR-015; main-08 ``profile.go`` / ``profile_resolution.go``).

A profiled overlay (``apiVersion: aicr.run/v1alpha3``) declares ``spec.profile`` with a name
(``gpuStack``), a default value and, per value, component overrides and constraints on a
*closed* surface: every value must assign exactly the same override paths ("union totality").
Resolution applies the selected value (or the default) last, at the highest precedence, and
stamps ``metadata.selectedProfile`` with the owned paths of every referenced component (plus the
synthetic ``enabled`` path) so bundle-time ``--set`` cannot silently change them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any

from .errors import ResolutionError, goq
from .model import Constraint, ProfileDeclaration

_IDENT = re.compile(r"^[A-Za-z0-9._-]+$")
_JSON_SAFE_INT = (1 << 53) - 1
ADVERTISER_EXTERNAL = "external"


class ProfileDeclarationError(ValueError):
    """An invalid ``spec.profile``; ``catalog.py`` turns it into a ``CatalogError``."""


def _ident(value: str) -> bool:
    return bool(_IDENT.match(value))


def validate_advertiser(advertiser: str) -> None:
    if advertiser not in ("", ADVERTISER_EXTERNAL):
        raise ProfileDeclarationError(
            f"unknown advertiser {goq(advertiser)}; the only supported value is "
            f"{goq(ADVERTISER_EXTERNAL)}"
        )


def _check_scalar(value: Any, path: str) -> None:
    if isinstance(value, bool | str) or value is None:
        return
    if isinstance(value, int):
        if abs(value) > _JSON_SAFE_INT:
            raise ProfileDeclarationError(
                f"profile override {goq(path)} contains integer {value} outside the JSON "
                "round-trip-safe range"
            )
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ProfileDeclarationError(
                f"profile override {goq(path)} contains a non-finite float"
            )
        if value == math.trunc(value) and abs(value) > _JSON_SAFE_INT:
            raise ProfileDeclarationError(
                f"profile override {goq(path)} contains an integer-valued float outside the JSON "
                "round-trip-safe range"
            )
        return
    # time.Time (datetime) values are accepted by AICR as well.
    if hasattr(value, "isoformat"):
        return
    raise ProfileDeclarationError(
        f"profile override {goq(path)} uses unsupported scalar type {type(value).__name__}"
    )


def _check_tree(value: Any, path: str) -> None:
    """``validateProfileOverrideMapKeys``: string-keyed maps and supported scalars only."""
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise ProfileDeclarationError(
                f"profile override {goq(path)} must use a string-keyed mapping"
            )
        for k, v in value.items():
            _check_tree(v, f"{path}.{k}" if path else k)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_tree(v, f"{path}[{i}]")
    else:
        _check_scalar(value, path)


def flatten_overrides(overrides: dict[str, Any] | None) -> list[str]:
    """Sorted dotted leaf paths a profile value assigns (``driver.enabled``)."""
    if not overrides:
        return []
    _check_tree(overrides, "")
    paths: list[str] = []
    todo: list[tuple[dict[str, Any], tuple[str, ...]]] = [(overrides, ())]
    while todo:
        values, prefix = todo.pop()
        for key, value in values.items():
            if key == "" or "." in key:
                raise ProfileDeclarationError(
                    f"profile override key {goq(key)} must be nonempty and may not contain a "
                    "literal dot"
                )
            path = (*prefix, key)
            if isinstance(value, dict):
                if not value:
                    raise ProfileDeclarationError(
                        f"profile override {goq('.'.join(path))} assigns an empty map"
                    )
                todo.append((value, path))
                continue
            paths.append(".".join(path))
    paths.sort()
    return paths


def validate_declaration(decl: ProfileDeclaration) -> dict[str, tuple[str, ...]]:
    """``ValidateProfileDeclaration``: check the declaration, return its owned paths.

    Raises ``ProfileDeclarationError`` with AICR's message on the first violation.
    """
    if not _ident(decl.name):
        raise ProfileDeclarationError("profile name must match [A-Za-z0-9._-]+")
    if not _ident(decl.default):
        raise ProfileDeclarationError("profile default must match [A-Za-z0-9._-]+")
    if not decl.values:
        raise ProfileDeclarationError(f"profile {goq(decl.name)} must declare at least one value")
    if decl.default not in decl.values:
        raise ProfileDeclarationError(
            f"profile {goq(decl.name)} default {goq(decl.default)} is not a declared value"
        )
    lowered: dict[str, str] = {}
    for name in decl.values:
        prev = lowered.get(name.lower())
        if prev is not None:
            raise ProfileDeclarationError(
                f"profile {goq(decl.name)} values {goq(prev)} and {goq(name)} differ only by case; "
                "evidence path segments are lowercase, so value names must be "
                "case-insensitively unique"
            )
        lowered[name.lower()] = name

    expected: list[str] | None = None
    owned: dict[str, set[str]] = {}
    for value_name in sorted(decl.values):
        if not _ident(value_name):
            raise ProfileDeclarationError(
                f"profile value {goq(value_name)} must match [A-Za-z0-9._-]+"
            )
        value = decl.values[value_name]
        where = f"profile {goq(decl.name)} value {goq(value_name)}"
        validate_advertiser(value.advertiser)
        seen_constraints: set[str] = set()
        for c in value.constraints:
            if not c.name:
                raise ProfileDeclarationError(f"{where} declares a constraint with no name")
            if not c.value:
                raise ProfileDeclarationError(f"{where} constraint {goq(c.name)} has no value")
            if c.name in seen_constraints:
                raise ProfileDeclarationError(f"{where} repeats constraint {goq(c.name)}")
            seen_constraints.add(c.name)
        seen_refs: set[str] = set()
        value_paths: list[str] = []
        for ref in value.component_refs:
            if not ref.name:
                raise ProfileDeclarationError(f"{where} has a componentRef with an empty name")
            if ref.name in seen_refs:
                raise ProfileDeclarationError(f"{where} repeats componentRef {goq(ref.name)}")
            seen_refs.add(ref.name)
            if ref.overrides and "enabled" in ref.overrides:
                raise ProfileDeclarationError(
                    f"{where} component {goq(ref.name)} may not assign overrides.enabled"
                )
            for path in flatten_overrides(ref.overrides):
                value_paths.append(f"{ref.name}:{path}")
                owned.setdefault(ref.name, set()).add(path)
            owned.setdefault(ref.name, set()).add("enabled")
        value_paths.sort()
        if expected is None:
            expected = value_paths
        elif value_paths != expected:
            raise ProfileDeclarationError(
                f"profile {goq(decl.name)} violates union totality: value {goq(value_name)} "
                f"assigns {_go_list(value_paths)}, expected {_go_list(expected)}"
            )
    return {component: tuple(sorted(paths)) for component, paths in owned.items()}


def _go_list(items: list[str]) -> str:
    """Go's ``%v`` of a ``[]string``."""
    return "[" + " ".join(items) + "]"


@dataclass(frozen=True, slots=True)
class ProfileSelection:
    name: str
    value: str


def parse_selection(raw: str | None) -> ProfileSelection | None:
    """``ParseProfileSelection``: ``None``/empty = use the default, else exact ``name=value``."""
    if not raw:
        return None
    if raw.strip() != raw or raw.count("=") != 1:
        raise ResolutionError("profile must use the exact name=value form")
    name, _, value = raw.partition("=")
    if not _ident(name) or not _ident(value):
        raise ResolutionError("profile name and value must match [A-Za-z0-9._-]+")
    return ProfileSelection(name, value)


def deep_merge(dst: dict[str, Any] | None, src: dict[str, Any]) -> dict[str, Any]:
    """AICR ``deepMergeMap`` without mutation: a new dict, ``src`` winning.

    Only ``map[string]any`` values (dicts whose keys are all strings) merge recursively; any
    other value (lists, scalars, maps with non-string keys) replaces the destination. Unchanged
    subtrees are shared, which is safe because nothing in the resolver mutates them.
    """
    out = dict(dst) if dst else {}
    for key, sv in src.items():
        if type(sv) is dict and _str_keyed(sv):
            dv = out.get(key)
            if type(dv) is dict and _str_keyed(dv):
                out[key] = deep_merge(dv, sv)
                continue
        out[key] = sv
    return out


def _str_keyed(d: dict[Any, Any]) -> bool:
    return all(type(k) is str for k in d)


def apply_profile(
    constraints: list[Constraint],
    refs: list[Any],
    source: str,
    decl: ProfileDeclaration,
    raw_selection: str | None,
) -> tuple[list[Constraint], list[Any], dict[str, Any]]:
    """``applyEffectiveProfile``: apply the selected value; return new lists + selectedProfile.

    ``refs`` are ``ComponentRef`` objects; the returned lists are new (inputs untouched).
    """
    del source  # kept for symmetry with AICR's effective declaration (used in messages upstream)
    selection = parse_selection(raw_selection)
    value_name = decl.default
    if selection is not None:
        if selection.name != decl.name:
            raise ResolutionError(
                f"resolved composition declares profile {goq(decl.name)}, not {goq(selection.name)}"
            )
        value_name = selection.value
    value = decl.values.get(value_name)
    if value is None:
        names = " ".join(sorted(decl.values))
        raise ResolutionError(
            f'profile "{decl.name}" has no value "{value_name}"; valid values: [{names}]'
        )
    index = {ref.name: i for i, ref in enumerate(refs)}
    for component in sorted(decl.owned_paths):
        i = index.get(component)
        if i is None or not refs[i].is_enabled():
            raise ResolutionError(
                f'profile "{decl.name}" references component "{component}", which is not '
                "enabled in the surviving composition"
            )
    taken = {c.name for c in constraints}
    out_constraints = list(constraints)
    for c in value.constraints:
        if c.name in taken:
            raise ResolutionError(
                f'profile "{decl.name}" value "{value_name}" constraint "{c.name}" collides '
                "with the composed recipe"
            )
        taken.add(c.name)
        out_constraints.append(c)
    out_constraints.sort(key=_by_name)
    out_refs = list(refs)
    for pref in value.component_refs:
        i = index[pref.name]
        out_refs[i] = replace(
            out_refs[i], overrides=deep_merge(out_refs[i].overrides, pref.overrides or {})
        )
    selected: dict[str, Any] = {
        "name": decl.name,
        "value": value_name,
        "ownedPaths": {k: list(v) for k, v in decl.owned_paths.items()},
    }
    if value.advertiser:
        selected["advertiser"] = value.advertiser
    return out_constraints, out_refs, selected


def _by_name(c: Constraint) -> str:
    return c.name
