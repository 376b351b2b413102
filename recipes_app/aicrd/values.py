"""The Helm values files a hydrated recipe needs, from the loaded catalog version.

The texts come from the parsed catalog ``services.loaded_catalog`` already keeps per version;
each file is parsed by ``hydrate.parse_values_text`` and kept in a small per-process cache: a
catalog version's files never change.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

from recipes_app import services
from recipes_app.aicrd.hydrate import ValuesReader, parse_values_text
from recipes_app.models import Catalog

_CACHE: OrderedDict[tuple[int, str], Any] = OrderedDict()
_CACHE_LOCK = threading.Lock()
_CACHE_MAX = 1024
_MISSING = object()


def referenced_files(doc: Mapping[str, Any]) -> list[str]:
    """Every values file hydration may read: each ``valuesFile`` and its component's base."""
    paths: list[str] = []
    for ref in doc.get("componentRefs") or []:
        values_file = ref.get("valuesFile")
        if values_file:
            paths += [values_file, f"components/{ref['name']}/values.yaml"]
    return list(dict.fromkeys(paths))


def values_reader(catalog: Catalog, doc: Mapping[str, Any]) -> ValuesReader:
    """A reader over the values files ``doc`` references in ``catalog``."""
    parsed = _load(catalog, referenced_files(doc))

    def read(path: str) -> Any:
        return parsed.get(path)

    return read


def _load(catalog: Catalog, paths: Iterable[str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    wanted: list[str] = []
    with _CACHE_LOCK:
        for path in paths:
            value = _CACHE.get((catalog.pk, path), _MISSING)
            if value is _MISSING:
                wanted.append(path)
            else:
                _CACHE.move_to_end((catalog.pk, path))
                found[path] = value
    if not wanted:
        return found
    files = services.loaded_catalog(catalog).files
    fetched = {path: parse_values_text(path, files.get(path)) for path in wanted}
    with _CACHE_LOCK:
        for path, value in fetched.items():
            _CACHE[(catalog.pk, path)] = value
        while len(_CACHE) > _CACHE_MAX:
            _CACHE.popitem(last=False)
    return found | fetched
