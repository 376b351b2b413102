"""A v1-format (``aicr.run/v1beta1``/``v1beta2``) recipe tree made from an older one.

No complete AICR 1.x recipe tree exists offline (AICR-V1.md §10). To exercise the v1 apiVersion
family end to end, this rewrites a v0.19 tree by ADR-022's apiVersion map and nothing else:
``aicr.run/v1alpha2`` → ``aicr.run/v1beta1``, ``aicr.run/v1alpha3`` → ``aicr.run/v1beta2``, in
the top-level ``apiVersion`` line of ``registry.yaml``, ``overlays/*.yaml`` and
``mixins/*.yaml``. Its content (components, versions, checks) is still v0.19's: it is a
**v1-format copy of the v0.19 catalog, not AICR 1.x's catalog**, and whatever imports it must
say so in its source label. AICR's real v1beta1 ``overlays/a100-any.yaml`` differs from the
v0.19 file in exactly that line, so the map reproduces it byte for byte (a test checks this).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from recipes_app.resolver.model import ALPHA, V1

#: ADR-022's map for catalog kinds (docs/design/022-artifact-maturity-and-deprecation.md).
APIVERSION_MAP: dict[str, str] = {
    ALPHA.catalog: V1.catalog,
    ALPHA.catalog_profiled: V1.catalog_profiled,
}
#: What a source label of such a tree should say.
SOURCE_NOTE = (
    "v1-format copy of the v0.19 catalog by ADR-022's apiVersion map (not AICR 1.x content)"
)

_TOP_LEVEL_API = re.compile(r"^apiVersion:[ \t]*(\S+)[ \t]*$", re.MULTILINE)


def _is_catalog_file(path: str) -> bool:
    if path == "registry.yaml":
        return True
    folder, _, name = path.partition("/")
    return folder in ("overlays", "mixins") and "/" not in name and name.endswith(".yaml")


def to_v1_tree(files: Mapping[str, str]) -> dict[str, str]:
    """``files`` (``resolver.read_tree`` output) with every catalog file's top-level
    ``apiVersion`` mapped to its v1 family value; other files unchanged."""

    def mapped(match: re.Match[str]) -> str:
        api = match[1]
        return match[0].replace(api, APIVERSION_MAP.get(api, api), 1)

    return {
        path: _TOP_LEVEL_API.sub(mapped, text, count=1) if _is_catalog_file(path) else text
        for path, text in files.items()
    }
