"""A catalog whose recipes carry a contradictory GPU allocation configuration, imported through
the product's own importer: the real AICR tree with one line of one values file changed."""

from __future__ import annotations

from collections.abc import Mapping

from recipes_app.models import Catalog
from recipes_app.services import catalog_import

DRA_VALUES = "components/nvidia-dra-driver-gpu/values.yaml"
# AICR's text (pkg/allocpolicy/allocpolicy.go) for resources.gpus.enabled=true without the waiver.
CHART_GUARD = (
    "invalid GPU allocation configuration: nvidia-dra-driver-gpu resources.gpus.enabled=true "
    "requires gpuResourcesEnabledOverride=true — the upstream chart install guard rejects this "
    "combination; set both in the recipe overlay (issue #1327)"
)


def contradictory_catalog(files: Mapping[str, str]) -> Catalog:
    """The tree with the DRA driver's full-GPU switch on and the chart's waiver still off."""
    text = files[DRA_VALUES]
    changed = text.replace("  gpus:\n    enabled: false", "  gpus:\n    enabled: true", 1)
    assert changed != text, f"{DRA_VALUES} no longer pins resources.gpus.enabled: false"
    return catalog_import(
        files={**files, DRA_VALUES: changed},
        source="aicr main-08 with resources.gpus.enabled=true and no waiver (tests)",
        aicr_version="dev",
    ).catalog
