"""The 427 criteria projections of AICR's coverage golden, resolved by the Python port.

Two goldens describe the same projections: ``coverage_golden.yaml`` (AICR's own test data:
outcome, uncovered dimensions, requires-OS flag, valid completions) and
``query-projections.json`` (AICR's resolver run on each: error text, applied overlays,
deployment order, components, merged constraints, apiVersion and the document's sha256).
Each test resolves all of them and reports every mismatch with the pass count.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml

from recipes_app.resolver import Catalog, ResolutionError, parse_criteria, resolve, yamlv3
from tests.shared_data import GOLDEN

COVERAGE = GOLDEN / "upstream/pkg/recipe/testdata/coverage_golden.yaml"
PROJECTIONS = GOLDEN / "generated/query-projections.json"
PARITY_VERSION = "catalog-parity-golden"
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _load_yaml(text: str) -> Any:
    return yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader


def _key_query(key: str) -> dict[str, str]:
    """``criteria(service=, accelerator=a100, ...)`` -> the stated dimensions."""
    return {k: v for k, v in re.findall(r"(\w+)=([^,)]*)", key) if v}


def _classify(catalog: Catalog, query: dict[str, str]) -> dict[str, Any]:
    try:
        resolve(catalog, query, version=PARITY_VERSION)
    except ResolutionError as exc:
        got: dict[str, Any] = {"outcome": "error"}
        if exc.requires_os:
            got["requiresOS"] = True
        if exc.uncovered:
            got["uncovered"] = exc.uncovered
        completions = {k: v for k, v in exc.valid_completions.items() if v}
        if completions:
            got["validCompletions"] = completions
        return got
    return {"outcome": "success"}


def _projection(catalog: Catalog, query: dict[str, str]) -> dict[str, Any]:
    try:
        doc = resolve(catalog, query, version=PARITY_VERSION)
    except ResolutionError as exc:
        return {"outcome": "error", "error": f"[{exc.code}] {exc.message}"}
    components = []
    for ref in doc["componentRefs"]:
        overrides = ref.get("overrides") or {}
        comp = {
            "name": ref["name"],
            "type": ref["type"],
            "source": ref["source"],
            "version": ref.get("version", ""),
            "namespace": ref.get("namespace", ""),
            "valuesFile": ref.get("valuesFile", ""),
            "enabled": overrides.get("enabled") is not False
            and overrides.get("install") is not False,
        }
        if ref.get("dependencyRefs"):
            comp["dependencyRefs"] = ref["dependencyRefs"]
        components.append(comp)
    return {
        "outcome": "success",
        "appliedOverlays": doc["metadata"]["appliedOverlays"],
        "deploymentOrder": doc["deploymentOrder"],
        "components": components,
        "constraints": doc.get("constraints", []),
        "apiVersion": doc["apiVersion"],
    }


def test_it_matches_coverage_golden_for_all_427_projections(catalog: Catalog) -> None:
    golden = _load_yaml(COVERAGE.read_text())
    assert len(golden) == 427
    mismatches = []
    for key, want in golden.items():
        got = _classify(catalog, _key_query(key))
        if got != want:
            mismatches.append(f"{key}: got {got}, want {want}")
    passed = len(golden) - len(mismatches)
    assert not mismatches, f"{passed}/{len(golden)} match; mismatches:\n" + "\n".join(mismatches)


def test_it_matches_query_projections_for_all_427(catalog: Catalog) -> None:
    projections = json.loads(PROJECTIONS.read_text())
    assert len(projections) == 427
    mismatches = []
    for p in projections:
        got = _projection(catalog, p["query"])
        want = {k: p[k] for k in got if k in p}
        if got != want:
            diff = sorted(k for k in got if got.get(k) != want.get(k))
            mismatches.append(f"{p['query']}: fields {diff} differ")
    passed = len(projections) - len(mismatches)
    assert not mismatches, f"{passed}/{len(projections)} match; mismatches:\n" + "\n".join(
        mismatches
    )
    outcomes = [p["outcome"] for p in projections]
    assert outcomes.count("success") == 117
    assert outcomes.count("error") == 310


def test_it_yamlv3_projection_digests_match(catalog: Catalog) -> None:
    """Whole-document check: sha256 of the deterministic YAML of every successful projection."""
    projections = [p for p in json.loads(PROJECTIONS.read_text()) if p["outcome"] == "success"]
    mismatches = [
        str(p["query"])
        for p in projections
        if yamlv3.parity_digest(resolve(catalog, p["query"], version=PARITY_VERSION)) != p["sha256"]
    ]
    assert not mismatches, f"{len(projections) - len(mismatches)}/{len(projections)} match: " + (
        ", ".join(mismatches)
    )


def test_it_requires_an_os_for_gke_without_one(catalog: Catalog) -> None:
    with pytest.raises(ResolutionError) as info:
        resolve(catalog, {"service": "gke", "accelerator": "h100"}, version="dev")
    err = info.value
    assert err.code == "INVALID_REQUEST"
    assert err.requires_os is True
    assert err.uncovered == []
    assert err.message == (
        "service 'gke' has no OS-agnostic recipe for accelerator 'h100'; specify an OS (valid: cos)"
    )
    assert str(err) == f"[INVALID_REQUEST] {err.message}"


def test_it_reports_uncovered_dimensions_with_completions(catalog: Catalog) -> None:
    query = parse_criteria({"service": "eks", "accelerator": "h100", "platform": "kubeflow"})
    with pytest.raises(ResolutionError) as info:
        resolve(catalog, query, version="dev")
    err = info.value
    assert err.uncovered == ["platform"]
    assert err.valid_completions == {"platform": ["intent=training, os=ubuntu"]}
    assert err.requires_os is False
    assert err.message.startswith("platform 'kubeflow' requires additional criteria")


def test_it_states_unstated_dimensions_as_any(catalog: Catalog) -> None:
    doc = resolve(catalog, {"accelerator": "a100"}, version="dev")
    assert doc["criteria"] == {
        "service": "any",
        "accelerator": "a100",
        "intent": "any",
        "os": "any",
        "platform": "any",
    }
    assert doc["metadata"] == {
        "version": "dev",
        "appliedOverlays": ["base", "monitoring-hpa", "a100-any"],
    }
