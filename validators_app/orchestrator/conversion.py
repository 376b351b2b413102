"""The run's ``validation.yaml`` document: AICR's ``ToValidationInputWithContext`` (with the
resolved GPU allocation policy, ``allocation.py``) followed by ``resolveBenchmarkRuntimeRef``
(``runtime_ref.py``), both over the recipe's catalog files as AICR reads its DataProvider.

``run_validation`` builds it after the snapshot and before readiness, as ``aicr validate``
does (AICR-VALIDATE.md §1 steps 6 and 7.1); the site's run start calls the same function so a
recipe that can never run is refused with a 400 instead of a queued run that errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from recipes_app.aicrd.hydrate import parse_values_text

from . import plan
from .allocation import resolve_gpu_allocation_policy
from .runtime_ref import lower_benchmark_runtime_ref

__all__ = ["CatalogData", "validation_document"]


class CatalogData:
    """One catalog version's files as AICR's recipe DataProvider: values files parsed with
    yaml.v3 typing (once each), any file's text. ``None`` files: no data tree at all."""

    def __init__(self, files: Mapping[str, str] | None) -> None:
        self.files = files
        self._parsed: dict[str, Any] = {}  # one run's worth: a handful of values files

    def values(self, path: str) -> Any:
        if path not in self._parsed:
            self._parsed[path] = parse_values_text(path, self.text(path))
        return self._parsed[path]

    def text(self, path: str) -> str | None:
        return self.files.get(path) if self.files is not None else None


def validation_document(recipe: Mapping[str, Any], data: CatalogData) -> dict[str, Any]:
    """The ValidationInput mounted at ``/data/validation/validation.yaml``.

    Raises ``InvalidRecipeInput`` (AICR's message) when the allocation configuration is
    contradictory or malformed, or a runtime ref cannot be resolved.
    """
    policy = resolve_gpu_allocation_policy(recipe, read=data.values)
    document = plan.validation_input(recipe, gpu_allocation_policy=policy)
    return lower_benchmark_runtime_ref(document, read=data.text if data.files is not None else None)
