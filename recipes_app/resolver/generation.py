"""Which AICR generation a resolution speaks: its RecipeResult apiVersions and error shapes.

What a resolution emits depends on the AICR version it is stamped with (``metadata.version``),
as the ``aicr`` binary of that version would emit it (ADR-022, AICR-V1.md §3-§4):

- up to v0.21 a RecipeResult is ``aicr.run/v1alpha2`` (profiled or Slurm-configured:
  ``v1alpha3``); from v0.22 it is ``aicr.run/v1`` (profiled or Slurm-configured: ``v1beta2``);
- from v0.20 (PR #2322, merged 2026-08-21, after the bundled v0.19 tree) the "specify an OS"
  guard answers in the joint-coverage shape (``uncovered`` + ``validCompletions``) instead of
  ``requiresOS``.

A version that is not a release (``dev``, the parity golden's ``catalog-parity-golden``) is a
build of the tree itself: it speaks the generation of the tree's apiVersion family.

Which AICR versions read which trees (ADR-022 phases): v0.21 and v0.22 read both families,
v0.23 and later read v1beta1/v1beta2 only, and nothing before v0.21 reads them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .model import ALPHA, V1, ApiFamily

if TYPE_CHECKING:
    from .catalog import Catalog

_RELEASE = re.compile(r"v?(\d{1,9})\.(\d{1,9})\.(\d{1,9})(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?")


@dataclass(frozen=True, slots=True)
class Generation:
    """What a resolution emits: the apiVersion family of its results, and whether the OS guard
    is part of the joint coverage rule (#2322)."""

    results: ApiFamily
    joint_os_coverage: bool


def release_of(version: str) -> tuple[int, int, int] | None:
    """(major, minor, patch) of an AICR release version (``v1.0.0``, ``1.2.3-rc.1``); None for
    anything else (``dev``, a label)."""
    match = _RELEASE.fullmatch(version.strip())
    if match is None:
        return None
    return int(match[1]), int(match[2]), int(match[3])


def generation_for(catalog: Catalog, version: str) -> Generation:
    release = release_of(version)
    if release is None:
        v1 = catalog.api_family is V1
        return Generation(results=V1 if v1 else ALPHA, joint_os_coverage=v1)
    return Generation(
        results=V1 if release >= (0, 22, 0) else ALPHA,
        joint_os_coverage=release >= (0, 20, 0),
    )


def unreadable_reason(catalog: Catalog, version: str) -> str:
    """Why AICR ``version`` cannot read this tree ("" when it can, or is not a release)."""
    release = release_of(version)
    if release is None:
        return ""
    family = catalog.api_family
    if family is V1 and release < (0, 21, 0):
        return (
            f"AICR {version} reads only {ALPHA.catalog}/{ALPHA.catalog_profiled} catalogs; this "
            f"tree uses {V1.catalog}/{V1.catalog_profiled} (read from AICR v0.21, ADR-022)"
        )
    if family is ALPHA and release >= (0, 23, 0):
        return (
            f"AICR {version} reads only {V1.catalog}/{V1.catalog_profiled} catalogs; this tree "
            f"uses {ALPHA.catalog}/{ALPHA.catalog_profiled} (read up to AICR v0.22, ADR-022)"
        )
    return ""
