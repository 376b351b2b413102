"""Dashboard coordinates (AICR's golden vectors) and declared checks with their thresholds."""

from __future__ import annotations

import json
from typing import Any

import pytest

from recipes_app.resolver import (
    Catalog,
    coordinate_for,
    declared_checks,
    parse_criteria,
    resolve,
    resolve_leaves,
    threshold_owner,
)
from tests.shared_data import GOLDEN

VECTORS = json.loads(
    (GOLDEN / "upstream/pkg/corroborate/testdata/golden-coordinates.json").read_text()
)["vectors"]


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_it_computes_golden_coordinates(vector: dict[str, Any]) -> None:
    assert coordinate_for(vector["criteria"]) == vector["path"]
    c = vector["coordinate"]
    assert vector["path"] == f"{c['group']}/{c['dashboard']}/{c['tab']}"


def test_it_computes_coordinates_from_criteria_objects() -> None:
    criteria = parse_criteria({"service": "kind", "gpu": "h100", "intent": "training"})
    assert coordinate_for(criteria) == "kind/h100-any/training"
    assert (
        coordinate_for(
            parse_criteria(
                {
                    "service": "aks",
                    "accelerator": "h100",
                    "os": "ubuntu",
                    "intent": "training",
                    "platform": "kubeflow",
                }
            ),
            profile="gpuStack=Operator-Managed",
        )
        == "aks/h100-ubuntu/training-kubeflow-gpustack-operator-managed"
    )


@pytest.mark.parametrize(
    "criteria",
    [
        {"accelerator": "h100", "intent": "training"},
        {"service": "any", "accelerator": "h100", "intent": "training"},
        {"service": "eks", "intent": "training"},
        {"service": "eks", "accelerator": "h100"},
        {"service": "e/ks", "accelerator": "h100", "intent": "training"},
    ],
)
def test_it_has_no_coordinate_for_open_criteria(criteria: dict[str, str]) -> None:
    assert coordinate_for(criteria) is None


def test_it_attributes_thresholds_to_declared_checks(catalog: Catalog) -> None:
    doc = resolve(
        catalog,
        {
            "service": "eks",
            "accelerator": "h100",
            "os": "ubuntu",
            "intent": "inference",
            "platform": "dynamo",
        },
        version="dev",
    )
    checks = declared_checks(doc)
    assert list(checks) == ["deployment", "performance", "conformance"]
    deployment = {c["name"]: c["thresholds"] for c in checks["deployment"]}
    assert deployment["gpu-operator-version"] == [
        {"name": "Deployment.gpu-operator.version", "value": ">= v24.6.0"}
    ]
    assert deployment["operator-health"] == []
    assert checks["performance"] == [
        {
            "name": "inference-perf",
            "thresholds": [
                {"name": "inference-model", "value": "Qwen/Qwen3-8B"},
                {"name": "inference-concurrency-per-gpu", "value": "256"},
                {"name": "inference-routing-mode", "value": "dynamo-router"},
                {"name": "inference-throughput", "value": ">= 50000"},
                {"name": "inference-ttft-p99", "value": "<= 2000"},
            ],
        }
    ]
    assert all(c["thresholds"] == [] for c in checks["conformance"])


def test_it_keeps_nccl_variants_apart(catalog: Catalog) -> None:
    doc = resolve(
        catalog,
        {
            "service": "eks",
            "accelerator": "gb200",
            "os": "ubuntu",
            "intent": "training",
            "platform": "kubeflow",
        },
        version="dev",
    )
    performance = {c["name"]: c["thresholds"] for c in declared_checks(doc)["performance"]}
    assert performance == {
        "nccl-all-reduce-bw-net": [{"name": "nccl-all-reduce-bw-net", "value": ">= 40"}],
        "nccl-all-reduce-bw-nvls": [{"name": "nccl-all-reduce-bw-nvls", "value": ">= 500"}],
    }


def test_it_attributes_every_validation_constraint_of_every_leaf(catalog: Catalog) -> None:
    for name, doc in resolve_leaves(catalog, version="dev").items():
        for phase, block in (doc.get("validation") or {}).items():
            checks = block.get("checks") or []
            for constraint in block.get("constraints") or []:
                assert threshold_owner(constraint["name"], checks) is not None, (name, phase)


def test_it_applies_the_prefix_and_family_rules() -> None:
    checks = ["nccl-all-reduce-bw", "nccl-all-reduce-bw-net"]
    assert threshold_owner("nccl-all-reduce-bw-net-min", checks) == "nccl-all-reduce-bw-net"
    assert threshold_owner("nccl-all-reduce-bw-min", checks) == "nccl-all-reduce-bw"
    assert threshold_owner("nccl-other", checks) is None  # two "nccl" checks: ambiguous
    assert threshold_owner("inference-throughput", ["inference-perf"]) == "inference-perf"
    assert threshold_owner("Deployment.gpu-operator.version", ["gpu-operator-version"]) == (
        "gpu-operator-version"
    )
    assert threshold_owner("unrelated", ["inference-perf"]) is None
