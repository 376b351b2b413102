"""One catalog's values files, read one at a time by path (never the whole tree of files).

``Catalog.files`` holds a few MB of text; reading the GPU allocation policy of a recipe needs
one or two values files of it, so each is fetched as one JSON key (``KT``) and parsed with
yaml.v3 typing (``aicrd.hydrate.parse_values_text``), once per reader.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db.models.fields.json import KT

from recipes_app.aicrd.hydrate import parse_values_text
from recipes_app.models import Catalog


def catalog_values_reader(catalog_id: int | None) -> Callable[[str], Any]:
    """A ``ValuesReader`` over catalog ``catalog_id``'s files (``None`` for every path when
    there is no catalog)."""
    parsed: dict[str, Any] = {}

    def read(path: str) -> Any:
        if catalog_id is None or not path or "__" in path:
            return None
        if path not in parsed:
            text = (
                Catalog.objects.filter(pk=catalog_id)
                .annotate(_file=KT(f"files__{path}"))
                .values_list("_file", flat=True)
                .first()
            )
            parsed[path] = parse_values_text(path, text if isinstance(text, str) else None)
        return parsed[path]

    return read
