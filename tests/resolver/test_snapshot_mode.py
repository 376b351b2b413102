"""Snapshot mode (``aicr recipe --snapshot``): criteria from the fingerprint, and matched overlays
whose constraints fail against the snapshot excluded (AICR.md §1.3 step 11)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from evidence_app.attestation import fingerprint_of
from recipes_app.resolver import (
    Catalog,
    MeasurementMissing,
    ResolutionError,
    criteria_from_snapshot,
    resolve,
)
from tests.shared_data import MOCK_SNAPSHOT, SNAPSHOT_EXAMPLE
from validators_app.orchestrator.readiness import ConstraintError, evaluate_constraint, lookup

QUERY = {"service": "eks", "accelerator": "h100", "intent": "training", "platform": "kubeflow"}


def _snapshot() -> dict[str, Any]:
    return yaml.safe_load(SNAPSHOT_EXAMPLE.read_text())


def _evaluator(snapshot: dict[str, Any]):  # type: ignore[no-untyped-def]
    def evaluate(name: str, value: str) -> tuple[bool, str]:
        try:
            lookup(snapshot, name)
        except ConstraintError as exc:
            raise MeasurementMissing(str(exc)) from None
        return evaluate_constraint(snapshot, name, value)

    return evaluate


def _with_kernel(snapshot: dict[str, Any], kernel: str) -> dict[str, Any]:
    changed = copy.deepcopy(snapshot)
    for m in changed["measurements"]:
        for s in m["subtypes"]:
            if s["subtype"] == "sysctl":
                s["data"]["/proc/sys/kernel/osrelease"] = kernel
    return changed


def test_it_derives_only_what_the_fingerprint_measures() -> None:
    fingerprint = fingerprint_of(yaml.safe_load(MOCK_SNAPSHOT.read_text()))
    derived = criteria_from_snapshot(fingerprint, {})
    # The mock snapshot has no GPU or node readings: only the OS is measurable.
    assert derived.values == {"os": "ubuntu"}
    assert derived.origin == {"os": "snapshot"}


def test_it_lets_a_stated_value_win_and_never_derives_intent_or_platform() -> None:
    fingerprint = {
        "service": {"value": "eks"},
        "accelerator": {"value": "h100"},
        "os": {"value": "ubuntu"},
    }
    derived = criteria_from_snapshot(fingerprint, {"os": "talos", "intent": " training "})
    assert derived.values == {
        "service": "eks",
        "accelerator": "h100",
        "os": "talos",
        "intent": "training",
    }
    assert derived.stated() == ["os", "intent"]


def test_it_resolves_the_same_recipe_as_query_mode_when_every_constraint_holds(
    catalog: Catalog,
) -> None:
    query = {**QUERY, "os": "ubuntu"}
    plain = resolve(catalog, query, version="dev")
    with_snapshot = resolve(catalog, query, version="dev", evaluator=_evaluator(_snapshot()))
    assert with_snapshot == plain
    assert "excludedOverlays" not in with_snapshot["metadata"]


def test_it_excludes_an_overlay_whose_mixin_constraint_fails_and_reports_why(
    catalog: Catalog,
) -> None:
    snapshot = _with_kernel(_snapshot(), "5.15.0-1019-aws")
    with pytest.raises(ResolutionError) as err:
        resolve(catalog, {**QUERY, "os": "ubuntu"}, version="dev", evaluator=_evaluator(snapshot))
    # The ubuntu leaf was the only overlay carrying os=ubuntu: the dimension is uncovered, and
    # the error says which overlay was excluded and which constraint failed.
    assert "os" in err.value.uncovered
    assert err.value.excluded_overlays == [
        {"name": "h100-eks-ubuntu-training-kubeflow", "reason": "mixin-constraint-failed"}
    ]
    assert err.value.constraint_warnings == [
        {
            "overlay": "h100-eks-ubuntu-training-kubeflow",
            "constraint": "OS.sysctl./proc/sys/kernel/osrelease",
            "expected": ">= 6.8",
            "actual": "5.15.0-1019-aws",
            "reason": "expected >= 6.8, got 5.15.0-1019-aws",
        }
    ]


def test_it_excludes_an_overlay_whose_own_constraint_fails(catalog: Catalog) -> None:
    snapshot = _snapshot()
    snapshot["measurements"][0]["subtypes"][0]["data"]["version"] = "v1.29.3"
    with pytest.raises(ResolutionError) as err:
        resolve(catalog, {**QUERY, "os": "ubuntu"}, version="dev", evaluator=_evaluator(snapshot))
    assert err.value.excluded_overlays == [
        {"name": "h100-eks-ubuntu-training-kubeflow", "reason": "constraint-failed"}
    ]
    assert err.value.constraint_warnings[0]["constraint"] == "K8s.server.version"
    assert err.value.constraint_warnings[0]["actual"] == "v1.29.3"


def test_it_treats_a_missing_reading_as_a_failed_constraint(catalog: Catalog) -> None:
    snapshot = _snapshot()
    snapshot["measurements"] = [m for m in snapshot["measurements"] if m["type"] != "OS"]
    with pytest.raises(ResolutionError) as err:
        resolve(catalog, {**QUERY, "os": "ubuntu"}, version="dev", evaluator=_evaluator(snapshot))
    assert "os" in err.value.uncovered


def test_it_fails_closed_when_the_evaluator_breaks(catalog: Catalog) -> None:
    def broken(name: str, value: str) -> tuple[bool, str]:
        raise ValueError("evaluator bug")

    with pytest.raises(ResolutionError) as err:
        resolve(catalog, {**QUERY, "os": "ubuntu"}, version="dev", evaluator=broken)
    assert err.value.code == "INTERNAL"
    assert "evaluator bug" in err.value.message
