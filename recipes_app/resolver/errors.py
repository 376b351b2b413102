"""Errors raised by the resolver.

Two families, because callers treat them differently:

- ``CatalogError``: the recipe tree itself is broken or hostile (bad YAML, a cycle in
  ``spec.base``, a missing values file, a YAML bomb, ...). It always names the file and the
  field so a catalog author can fix it.
- ``ResolutionError``: the catalog is fine but a query cannot be resolved (unknown criteria
  value, uncovered dimension, OS required, bad profile selection). It carries AICR's error code
  and message (without the ``[CODE] `` prefix AICR's ``StructuredError.Error()`` adds) plus the
  machine-readable context AICR attaches to coverage errors.
"""

from __future__ import annotations

import json

CODE_INVALID_REQUEST = "INVALID_REQUEST"
CODE_NOT_FOUND = "NOT_FOUND"
CODE_INTERNAL = "INTERNAL"


class ResolverError(Exception):
    """Base class of every error this package raises on purpose."""


class CatalogError(ResolverError):
    """A recipe tree failed to load or validate.

    ``path`` is the file (relative POSIX path inside the tree) and ``field`` the dotted field
    path inside it (``spec.componentRefs[2].valuesFile``) or a location such as
    ``line 3, column 7`` for syntax errors.
    """

    def __init__(self, path: str, field: str, message: str) -> None:
        self.path = path
        self.field = field
        self.message = message
        super().__init__(f"{path}: {field}: {message}")


class ResolutionError(ResolverError):
    """A query could not be resolved; mirrors AICR's ``StructuredError``.

    ``message`` is AICR's message text without the ``[INVALID_REQUEST] `` prefix.
    ``uncovered`` lists the stated criteria dimensions no applied overlay carries (AICR
    #1542), ``valid_completions`` maps each of them to the rendered completion tuples
    (``"service=eks, accelerator=h100, intent=training"``), and ``requires_os`` is true for
    the ``requireOSIfNeeded`` guard ("specify an OS").
    """

    def __init__(
        self,
        message: str,
        *,
        code: str = CODE_INVALID_REQUEST,
        uncovered: list[str] | None = None,
        valid_completions: dict[str, list[str]] | None = None,
        requires_os: bool = False,
    ) -> None:
        self.code = code
        self.message = message
        self.uncovered: list[str] = list(uncovered or [])
        self.valid_completions: dict[str, list[str]] = dict(valid_completions or {})
        self.requires_os = requires_os
        # Snapshot mode: the overlays excluded before the failure (AICR attaches them to a
        # coverage error's context, since the exclusion may be why a dimension is uncovered).
        self.excluded_overlays: list[dict[str, str]] = []
        self.constraint_warnings: list[dict[str, str]] = []
        super().__init__(f"[{code}] {message}")


class CriteriaError(ResolutionError):
    """A criteria value or field the parser refuses (``invalid service type: windows``).

    A ``ResolutionError`` with code ``INVALID_REQUEST``, so callers may catch either.
    """


def goq(value: object) -> str:
    """Go's ``%q`` for a string (double-quoted, escaped), used to reproduce AICR's messages."""
    return json.dumps(str(value), ensure_ascii=False)


class MeasurementMissing(ResolverError):
    """A constraint evaluator's "the snapshot has no such reading" (AICR's ``ErrCodeNotFound``
    from the evaluator): in snapshot mode it excludes the overlay instead of failing."""
