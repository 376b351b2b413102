"""The hydrated recipe behind ``/v1/query`` and its dot-path selector (AICR ADR-004).

A port of AICR's ``recipe.HydrateResultWithContext`` and ``recipe.Select``: the RecipeResult
becomes one mapping in which every component carries its merged Helm ``values`` (the
component's base ``values.yaml``, then the ``valuesFile`` the recipe chose, then inline
``overrides``; ``null`` deletes a key), and a selector walks it key by key.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from typing import Any

from recipes_app.resolver import CatalogError, yamlload

#: Reads a values file of the catalog by path: its parsed mapping, or ``None`` when absent.
ValuesReader = Callable[[str], Any]


class SelectorNotFound(Exception):
    """The selector names no value; the message is AICR's."""


def hydrate(doc: Mapping[str, Any], *, read: ValuesReader) -> dict[str, Any]:
    """``doc`` with component values merged in, shaped like AICR's hydrated map."""
    meta = doc.get("metadata") or {}
    metadata: dict[str, Any] = {
        "version": meta.get("version", ""),
        "appliedOverlays": meta.get("appliedOverlays"),
        "excludedOverlays": meta.get("excludedOverlays"),
        "constraintWarnings": meta.get("constraintWarnings"),
    }
    for optional in ("gpuDriverState", "selectedProfile"):
        if meta.get(optional):
            metadata[optional] = meta[optional]

    hydrated: dict[str, Any] = {
        "kind": doc.get("kind", ""),
        "apiVersion": doc.get("apiVersion", ""),
        "metadata": metadata,
        "deploymentOrder": doc.get("deploymentOrder"),
    }
    criteria = doc.get("criteria")
    if criteria is not None:
        hydrated["criteria"] = {
            "service": criteria.get("service", ""),
            "accelerator": criteria.get("accelerator", ""),
            "intent": criteria.get("intent", ""),
            "os": criteria.get("os", ""),
            "platform": criteria.get("platform", ""),
            "nodes": criteria.get("nodes", 0),
        }
    constraints = doc.get("constraints") or []
    if constraints:
        hydrated["constraints"] = [
            {
                key: c[key]
                for key in ("name", "value", "severity", "remediation", "unit")
                if key in c
            }
            for c in constraints
        ]

    components: dict[str, Any] = {}
    for ref in doc.get("componentRefs") or []:
        component: dict[str, Any] = {
            "name": ref["name"],
            "type": ref.get("type", ""),
            "source": ref.get("source", ""),
        }
        if ref.get("namespace"):
            component["namespace"] = ref["namespace"]
        if ref.get("chart"):
            component["chart"] = ref["chart"]
        elif ref.get("type") == "Helm" and ref.get("source"):
            component["chart"] = ref["name"]  # EffectiveChart: a source-only ref deploys its name
        for key in ("version", "tag", "path"):
            if ref.get(key):
                component[key] = ref[key]
        if ref.get("dependencyRefs"):
            component["dependencyRefs"] = list(ref["dependencyRefs"])
        values = component_values(ref, read=read)
        if values:
            component["values"] = values
        components[ref["name"]] = component
    hydrated["components"] = components
    return hydrated


def parse_values_text(path: str, text: str | None) -> Any:
    """A values file as yaml.v3 decodes it into ``map[string]any`` (``yes`` stays a string,
    ``0o17`` is an int, as in AICR's ``GetValuesForComponent``); ``None`` if it is absent or
    not valid YAML."""
    if text is None:
        return None
    if all(not line.strip() or line.lstrip().startswith("#") for line in text.splitlines()):
        return {}  # yaml.v3 decodes an empty document to an empty map
    try:
        node = yamlload.parse_raw(text, path)
        return yamlload.as_any(node, yamlload.Ctx(path))
    except CatalogError:
        return None


def component_values(ref: Mapping[str, Any], *, read: ValuesReader) -> dict[str, Any]:
    """AICR ``GetValuesForComponent``: base values → ``valuesFile`` → ``overrides``.

    A missing base file is skipped (as AICR does); a missing ``valuesFile`` is an error.
    """
    result: dict[str, Any] = {}
    values_file = ref.get("valuesFile") or ""
    if values_file:
        values = read(values_file)
        if values is None:
            raise LookupError(f"values file {values_file!r} of component {ref['name']!r} not found")
        base_file = f"components/{ref['name']}/values.yaml"
        if values_file == base_file:
            result = _mapping(values)  # loaded as is: a null here stays a null
        else:
            result = _mapping(read(base_file))
            merge_values(result, _mapping(values))
    overrides = ref.get("overrides")
    if overrides:
        merge_values(result, _mapping(overrides))
    return result


def _mapping(value: Any) -> dict[str, Any]:
    """A private deep copy: merging mutates it, and the reader may hand out cached trees."""
    return copy.deepcopy(dict(value)) if isinstance(value, Mapping) else {}


def merge_values(dst: dict[str, Any], src: Mapping[str, Any]) -> None:
    """AICR ``mergeValues``: maps merge recursively, anything else replaces, ``None`` deletes."""
    for key, value in src.items():
        if value is None:
            dst.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(dst.get(key), dict):
            merge_values(dst[key], value)
        else:
            dst[key] = value


def select(hydrated: Mapping[str, Any], selector: str) -> Any:
    """AICR ``Select``: one leading dot is optional; empty returns everything."""
    selector = selector.removeprefix(".")
    if not selector:
        return hydrated
    current: Any = hydrated
    for part in selector.split("."):
        if not isinstance(current, Mapping):
            raise SelectorNotFound(
                f"selector {_quote(selector)}: cannot descend into non-map value at {_quote(part)}"
            )
        if part not in current:
            available = ", ".join(sorted(str(key) for key in current))
            raise SelectorNotFound(
                f"selector {_quote(selector)}: key {_quote(part)} not found, "
                f"available keys: {available}"
            )
        current = current[part]
    return current


def _quote(text: str) -> str:
    """Go's ``%q`` for the texts a selector holds."""
    return json.dumps(text, ensure_ascii=False)
