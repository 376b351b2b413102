"""Dashboard coordinate of a recipe (AICR.md §4.6; main-08 ``pkg/recipe/coordinate.go``).

``<service>/<accelerator>-<os|any>/<intent>[-<platform>]``: group = service, dashboard =
accelerator plus OS (``any`` when the recipe is OS-agnostic), tab = intent plus platform. For a
profiled recipe the tab gains ``-<profile name>-<value>`` in lower case, the same suffix AICR's
evidence pointers use. Service, accelerator and intent must be concrete; the Kubernetes version
is never part of the coordinate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .criteria import ANY, Criteria


def coordinate_parts(
    criteria: Criteria | Mapping[str, Any], *, profile: str | None = None
) -> tuple[str, str, str] | None:
    """``(group, dashboard, tab)`` or ``None`` when the criteria cannot address a dashboard.

    ``profile`` is a ``name=value`` selection (``gpuStack=operator-managed``) for profiled
    recipes; it is appended to the tab.
    """

    def get(name: str) -> str:
        if isinstance(criteria, Criteria):
            return criteria.dim(name)
        return str(criteria.get(name) or "")

    service, accelerator, intent = get("service"), get("accelerator"), get("intent")
    for value in (service, accelerator, intent):
        if value in ("", ANY) or "/" in value:
            return None
    os_name = get("os") or ANY
    platform = get("platform")
    if "/" in os_name or "/" in platform:
        return None
    tab = intent
    if platform not in ("", ANY):
        tab = f"{intent}-{platform}"
    if profile:
        name, _, value = profile.partition("=")
        if not name or not value or "/" in profile:
            return None
        tab = f"{tab}-{name.lower()}-{value.lower()}"
    return service, f"{accelerator}-{os_name}", tab


def coordinate_for(
    criteria: Criteria | Mapping[str, Any], *, profile: str | None = None
) -> str | None:
    """The coordinate path ``eks/h100-ubuntu/training-kubeflow``, or ``None`` if not concrete."""
    parts = coordinate_parts(criteria, profile=profile)
    return None if parts is None else "/".join(parts)
