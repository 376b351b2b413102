"""Criteria parsing (aliases, AICR's error texts, catalog-registered values) and matching."""

from __future__ import annotations

import pytest

from recipes_app.resolver import (
    Catalog,
    Criteria,
    ResolutionError,
    load_catalog,
    parse_criteria,
    resolve,
)


@pytest.mark.parametrize(
    ("mapping", "expected"),
    [
        ({"gpu": "h100"}, {"accelerator": "h100"}),
        ({"accelerator": "gb200", "gpu": "h100"}, {"accelerator": "gb200"}),
        ({"service": "self-managed"}, {"service": "any"}),
        ({"service": "self"}, {"service": "any"}),
        ({"service": "vanilla"}, {"service": "any"}),
        ({"service": "openshift"}, {"service": "ocp"}),
        ({"service": " EKS "}, {"service": "eks"}),
        ({"os": "al2"}, {"os": "amazonlinux"}),
        ({"os": "al2023"}, {"os": "amazonlinux"}),
        ({"os": "Ubuntu"}, {"os": "ubuntu"}),
        ({"intent": ""}, {"intent": "any"}),
        ({"platform": "any"}, {"platform": "any"}),
        ({"nodes": "8"}, {"nodes": 8}),
        ({"nodes": 0}, {"nodes": 0}),
    ],
)
def test_it_applies_aicr_aliases(mapping: dict[str, object], expected: dict[str, object]) -> None:
    parsed = parse_criteria(mapping)
    defaults = {
        "service": "any",
        "accelerator": "any",
        "intent": "any",
        "os": "any",
        "platform": "any",
        "nodes": 0,
    }
    assert parsed == Criteria(**{**defaults, **expected})


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        ({"service": "windows"}, "invalid service type: windows"),
        ({"accelerator": "Z100"}, "invalid accelerator type: Z100"),
        ({"gpu": "z100"}, "invalid accelerator type: z100"),
        ({"intent": "gaming"}, "invalid intent type: gaming"),
        ({"os": "sles"}, "invalid os type: sles"),
        ({"platform": "kueue"}, "invalid platform type: kueue"),
        ({"nodes": "-1"}, "invalid nodes count: -1 (must be >= 0)"),
        ({"nodes": "many"}, "invalid nodes value: many"),
        ({"servcie": "eks"}, "unknown criteria field(s): servcie"),
    ],
)
def test_it_rejects_unknown_values_with_aicr_text(mapping: dict[str, str], message: str) -> None:
    with pytest.raises(ResolutionError) as info:
        parse_criteria(mapping)
    assert info.value.code == "INVALID_REQUEST"
    assert info.value.message == message


def test_it_accepts_values_registered_by_loaded_overlays(tree_files: dict[str, str]) -> None:
    files = dict(tree_files)
    files["overlays/ncp-internal.yaml"] = (
        "kind: RecipeMetadata\napiVersion: aicr.run/v1alpha2\nmetadata:\n  name: ncp-internal\n"
        "spec:\n  criteria:\n    service: ncp-internal\n"
    )
    catalog = load_catalog(files)
    assert parse_criteria({"service": "NCP-Internal"}, catalog).service == "ncp-internal"
    with pytest.raises(ResolutionError, match="invalid service type: ncp-internal"):
        parse_criteria({"service": "ncp-internal"})
    doc = resolve(catalog, {"service": "ncp-internal"}, version="dev")
    assert doc["metadata"]["appliedOverlays"] == ["base", "monitoring-hpa", "ncp-internal"]


def test_it_accepts_static_values_no_overlay_uses(catalog: Catalog) -> None:
    assert (
        parse_criteria({"service": "metal3", "accelerator": "gb300"}, catalog).service == "metal3"
    )


def test_it_matches_asymmetrically() -> None:
    overlay = Criteria(service="eks", accelerator="h100")
    assert overlay.matches(Criteria(service="eks", accelerator="h100", intent="training"))
    assert not overlay.matches(Criteria(service="eks"))  # a generic query never pulls h100
    assert not overlay.matches(Criteria(service="eks", accelerator="any"))
    assert Criteria(service="any").matches(Criteria())
    assert Criteria(intent="any").matches(Criteria(service="gke", os="cos"))
    assert Criteria(service="eks", nodes=4).matches(Criteria(service="eks"))  # nodes ignored


def test_it_renders_criteria_like_aicr() -> None:
    assert str(Criteria(accelerator="a100")) == (
        "criteria(service=, accelerator=a100, intent=, os=, platform=)"
    )
    assert str(parse_criteria({"os": "cos"})) == "criteria(os=cos)"
    assert str(parse_criteria({})) == "criteria(any)"
    assert str(parse_criteria({"service": "eks", "nodes": 4})) == "criteria(service=eks, nodes=4)"
    assert Criteria(service="eks", os="ubuntu").specificity() == 2
    assert Criteria(service="any", nodes=2).specificity() == 1


def test_it_resolves_mappings_and_criteria_alike(catalog: Catalog) -> None:
    mapping = {"service": "eks", "gpu": "h100", "intent": "training", "os": "ubuntu"}
    assert resolve(catalog, mapping, version="dev") == resolve(
        catalog, parse_criteria(mapping, catalog), version="dev"
    )
