"""Reading the snapshot YAML a run took (a cluster wrote it, so it is untrusted input).

Parsed with the resolver's bounded yaml.v3 loader: size, depth, alias and expanded-node budgets
(a YAML bomb is refused before it is expanded) and yaml.v3's scalar typing, so re-serializing
the readings gives the values AICR would write.
"""

from __future__ import annotations

from typing import Any

from recipes_app.resolver.errors import CatalogError
from recipes_app.resolver.yamlload import Ctx, as_any, parse_raw

PATH = "snapshot.yaml"


class SnapshotError(ValueError):
    pass


def parse_snapshot(text: str) -> dict[str, Any]:
    """The snapshot document; ``SnapshotError`` naming what is wrong otherwise."""
    try:
        doc = as_any(parse_raw(text, PATH), Ctx(PATH))
    except CatalogError as exc:
        raise SnapshotError(f"unreadable snapshot: {exc}") from None
    if not isinstance(doc, dict) or not all(isinstance(k, str) for k in doc):
        raise SnapshotError("unreadable snapshot: the document is not a mapping")
    return doc
