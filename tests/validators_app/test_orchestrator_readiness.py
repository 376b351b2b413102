"""AICR's readiness gate (AICR-VALIDATE.md §3): paths, operators, version rules, messages."""

from __future__ import annotations

from dataclasses import astuple

import pytest
import yaml

from tests.shared_data import EVIDENCE_EXAMPLE_BUNDLE, SNAPSHOT_EXAMPLE
from validators_app.orchestrator import check_readiness, evaluate_constraint
from validators_app.orchestrator.readiness import (
    ConstraintError,
    lookup,
    parse_expression,
    parse_version,
)


def _snapshot(**readings: object) -> dict:
    """Measurements from ``Type.Subtype.Key=value`` pairs (SystemD split at the last dot)."""
    by_type: dict[str, dict[str, dict]] = {}
    for path, value in readings.items():
        mtype, rest = path.split(".", 1)
        sub, key = rest.rsplit(".", 1) if mtype == "SystemD" else rest.split(".", 1)
        by_type.setdefault(mtype, {}).setdefault(sub, {})[key] = value
    return {
        "measurements": [
            {"type": t, "subtypes": [{"subtype": s, "data": d} for s, d in subs.items()]}
            for t, subs in by_type.items()
        ]
    }


SNAP = _snapshot(
    **{
        "K8s.server.version": "v1.33.5-eks-113cf36",
        "OS.release.ID": "ubuntu",
        "OS.release.VERSION_ID": "24.04",
        "OS.sysctl./proc/sys/kernel/osrelease": "6.8.0-1015-aws",
        "SystemD.containerd.service.ActiveState": "active",
        "GPU.hardware.gpu-count": 8,
        "GPU.hardware.gpu-present": True,
    }
)


@pytest.mark.parametrize(
    ("name", "value", "satisfied"),
    [
        ("K8s.server.version", ">= 1.32.4", True),
        ("K8s.server.version", ">= 1.34", False),
        ("K8s.server.version", "> 1.33", False),  # lower precision: 1.33 vs 1.33 is equal
        ("K8s.server.version", "> 1.32", True),
        ("K8s.server.version", "< 1.34.0", True),
        ("K8s.server.version", "<= 1.33", True),
        ("K8s.server.version", "== 1.33.5", True),  # extras after '-' ignored
        ("K8s.server.version", "== 1.33", False),  # equality fills missing parts with 0
        ("K8s.server.version", "!= 1.33", True),
        ("K8s.server.version", ">= v1.33.5", True),
        ("OS.sysctl./proc/sys/kernel/osrelease", ">= 6.8", True),
        ("OS.sysctl./proc/sys/kernel/osrelease", ">= 6.9", False),
        ("OS.sysctl./proc/sys/kernel/osrelease", ">= 5.15.0", True),
        ("OS.release.ID", "ubuntu", True),
        ("OS.release.ID", "rhel", False),
        ("OS.release.ID", "== ubuntu", True),
        ("OS.release.ID", "!= ubuntu", False),
        ("OS.release.VERSION_ID", "24.04", True),  # no operator: exact string
        ("OS.release.VERSION_ID", "24.4", False),
        ("OS.release.VERSION_ID", "== 24.4", True),  # versions: 24.04 == 24.4
        ("OS.release.VERSION_ID", ">= 22.04", True),
        ("SystemD.containerd.service.ActiveState", "active", True),
        ("GPU.hardware.gpu-count", "8", True),
        ("GPU.hardware.gpu-present", "true", True),
        ("GPU.hardware.gpu-count", "  == 8  ", True),
    ],
)
def test_it_evaluates_like_aicr(name: str, value: str, satisfied: bool) -> None:
    assert evaluate_constraint(SNAP, name, value)[0] is satisfied


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("OS.release.ID", ">= 22.04"),  # ordering needs versions on both sides
        ("K8s.server.version", ">= latest"),
        ("K8s.server.version", "!1.33"),  # bare '!' is not an operator
        ("K8s.server.version", ">="),  # empty value
        ("K8s.server.platform", "eks"),  # reading absent
        ("GPU.nothing.x", "1"),
        ("K8s", "1"),  # not a path
    ],
)
def test_it_refuses_what_aicr_cannot_evaluate(name: str, value: str) -> None:
    with pytest.raises(ConstraintError):
        evaluate_constraint(SNAP, name, value)


def test_it_parses_versions_with_aicr_rules() -> None:
    assert astuple(parse_version("v1.33.5-eks-113cf36")) == (1, 33, 5, 3)
    assert astuple(parse_version("6.8.0-1015-aws")) == (6, 8, 0, 3)
    assert astuple(parse_version("1.32")) == (1, 32, 0, 2)
    assert astuple(parse_version("1.2.3+build")) == (1, 2, 3, 3)
    for bad in ("", "1.2.3.4", "a.b", "1.-2", "v"):
        with pytest.raises(ConstraintError):
            parse_version(bad)


def test_it_tries_operators_longest_first() -> None:
    assert parse_expression(">= 1.2").operator == ">="
    assert parse_expression("<=1.2").value == "1.2"
    assert parse_expression("!=x").operator == "!="
    assert parse_expression(" ubuntu ").operator == ""


def test_it_splits_systemd_paths_at_the_last_dot() -> None:
    assert lookup(SNAP, "SystemD.containerd.service.ActiveState") == "active"
    assert lookup(SNAP, "OS.sysctl./proc/sys/kernel/osrelease") == "6.8.0-1015-aws"


def test_it_stops_at_the_first_failure_with_aicrs_message() -> None:
    recipe = {
        "constraints": [
            {"name": "K8s.server.version", "value": ">= 1.32.4"},
            {
                "name": "OS.sysctl./proc/sys/kernel/osrelease",
                "value": ">= 6.10",
                "remediation": "Upgrade.",
            },
            {"name": "OS.release.ID", "value": "rhel"},
        ]
    }
    failure = check_readiness(recipe, SNAP)
    assert failure is not None
    assert failure.message == (
        "readiness check failed: OS.sysctl./proc/sys/kernel/osrelease expected >= 6.10, "
        "got 6.8.0-1015-aws\nUpgrade."
    )


def test_it_includes_readiness_phase_constraints_after_top_level() -> None:
    recipe = {
        "constraints": [{"name": "OS.release.ID", "value": "ubuntu"}],
        "validation": {
            "readiness": {"constraints": [{"name": "K8s.server.version", "value": ">= 1.35"}]}
        },
    }
    failure = check_readiness(recipe, SNAP)
    assert failure is not None
    assert (
        failure.message
        == "readiness check failed: K8s.server.version expected >= 1.35, got v1.33.5-eks-113cf36"
    )


def test_it_reports_could_not_evaluate() -> None:
    failure = check_readiness(
        {"constraints": [{"name": "K8s.node.kernel-version", "value": ">= 6"}]}, SNAP
    )
    assert failure is not None
    assert failure.message.startswith(
        "readiness check could not evaluate: K8s.node.kernel-version: "
    )


def test_the_example_recipe_passes_on_the_example_snapshot() -> None:
    recipe = yaml.safe_load((EVIDENCE_EXAMPLE_BUNDLE / "recipe.yaml").read_text())
    snapshot = yaml.safe_load(SNAPSHOT_EXAMPLE.read_text())
    assert check_readiness(recipe, snapshot) is None
    snapshot["measurements"][0]["subtypes"][0]["data"]["version"] = "v1.31.9"
    failure = check_readiness(recipe, snapshot)
    assert failure is not None
    assert (
        failure.message
        == "readiness check failed: K8s.server.version expected >= 1.32.4, got v1.31.9"
    )


def _topology(items: list[tuple[str, str, str, bool]]) -> dict:
    return {
        "measurements": [
            {
                "type": "NodeTopology",
                "subtypes": [
                    {
                        "subtype": "label",
                        "items": [
                            {
                                "context": {"key": k, "value": v},
                                "data": {
                                    "node-count": len(n.split(",")),
                                    "node-list": n,
                                    "truncated": t,
                                },
                            }
                            for k, v, n, t in items
                        ],
                    }
                ],
            }
        ]
    }


def test_gpu_nodes_label_quantifies_over_gpu_nodes_and_fails_closed() -> None:
    accel = ("cloud.google.com/gke-accelerator", "nvidia-h100-80gb", "n1,n2", False)
    optout = ("gke-no-default-nvidia-gpu-device-plugin", "true", "n2", False)
    name = "NodeTopology.gpu-nodes.label"
    assert evaluate_constraint(
        _topology([accel]), name, "!gke-no-default-nvidia-gpu-device-plugin"
    )[0]
    ok, offenders = evaluate_constraint(
        _topology([accel, optout]), name, "!gke-no-default-nvidia-gpu-device-plugin"
    )
    assert (ok, offenders) == (False, "n2")
    assert not evaluate_constraint(
        _topology([accel, optout]), name, "gke-no-default-nvidia-gpu-device-plugin=true"
    )[0]
    with pytest.raises(ConstraintError):  # empty universe
        evaluate_constraint(_topology([optout]), name, "!x")
    with pytest.raises(ConstraintError):  # truncated lists
        evaluate_constraint(_topology([(*accel[:3], True)]), name, "!x")


def test_a_snapshot_with_aliases_or_no_measurements_is_refused() -> None:
    from validators_app.orchestrator.run import RunError, parse_snapshot

    bomb = "a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\nmeasurements: []\n"
    with pytest.raises(RunError, match=r"(aliases|anchors) are not allowed"):
        parse_snapshot(bomb)
    with pytest.raises(RunError, match="no measurements"):
        parse_snapshot("kind: Snapshot\n")
    with pytest.raises(RunError, match="not valid YAML"):
        parse_snapshot("a: [\n")
    with pytest.raises(RunError, match="larger than"):
        parse_snapshot("x" * (5 * 1024 * 1024))
    assert parse_snapshot(SNAPSHOT_EXAMPLE.read_text())["kind"] == "Snapshot"


def test_gpu_nodes_label_follows_node_list_references() -> None:
    snapshot = _topology([("cloud.google.com/gke-accelerator", "nvidia-h100-80gb", "n1,n2", False)])
    label = snapshot["measurements"][0]["subtypes"][0]
    label["items"].append(
        {
            "context": {"key": "pool", "value": "a"},
            "data": {"node-count": 2, "node-list-ref": "pool", "truncated": False},
        }
    )
    label["data"] = {"pool": "a|n1,n2"}
    assert evaluate_constraint(snapshot, "NodeTopology.gpu-nodes.label", "pool=a")[0]
    label["data"] = {"pool": "a|n1 (+1 more)"}
    with pytest.raises(ConstraintError, match="truncated"):
        evaluate_constraint(snapshot, "NodeTopology.gpu-nodes.label", "pool=a")
