"""``evidence_app.attestation``: the bundle AICR's ``--emit-attestation`` writes, byte for byte."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml

from evidence_app.attestation import (
    BundleInput,
    RecipeInput,
    build_summary_bundle,
    criteria_match,
    fingerprint_of,
    redact_ctrf,
    redact_snapshot,
)
from evidence_app.attestation.snapshot import SnapshotError, parse_snapshot
from evidence_app.corroborate.gojson import marshal_indent
from tests.shared_data import EVIDENCE_EXAMPLE_BUNDLE, SNAPSHOT_EXAMPLE

PHASES = ("deployment", "conformance", "performance")
EXAMPLE_FILES = (
    "bom.cdx.json",
    "ctrf/conformance.json",
    "ctrf/deployment.json",
    "ctrf/performance.json",
    "manifest.json",
    "recipe.yaml",
    "snapshot.yaml",
    "statement.intoto.json",
)


def _golden(name: str) -> bytes:
    return (EVIDENCE_EXAMPLE_BUNDLE / name).read_bytes()


def _unredacted(report: bytes, **fields: Any) -> bytes:
    """A golden (redacted) phase report with fields put back into every test, in Go order."""
    doc = json.loads(report)
    doc["results"]["tests"] = [{**test, **fields} for test in doc["results"]["tests"]]
    return marshal_indent(doc)


def _example_input(**changes: Any) -> BundleInput:
    recipe_yaml = _golden("recipe.yaml").decode()
    recipe_doc = yaml.safe_load(recipe_yaml)
    serial = json.loads(_golden("bom.cdx.json"))["serialNumber"]
    values: dict[str, Any] = {
        "recipe": RecipeInput(
            name="h100-eks-ubuntu-training-kubeflow",
            canonical_yaml=recipe_yaml,
            criteria=recipe_doc["criteria"],
            components=recipe_doc["componentRefs"],
        ),
        "snapshot": parse_snapshot(SNAPSHOT_EXAMPLE.read_text()),
        "phase_reports": {
            phase: _unredacted(
                _golden(f"ctrf/{phase}.json"),
                message="skipped - no-cluster mode",
                stdout=["node ip-10-0-0-1.internal: <script>alert(1)</script>"],
            )
            for phase in PHASES
        },
        "aicr_version": "v0.19.0-example",
        "validator_catalog_version": "1.0.0",
        "validator_images": [
            f"ghcr.io/nvidia/aicr-validators/{image}:v0.19.0-example"
            for image in ("deployment", "performance", "conformance")
        ],
        "attested_at": datetime(2026, 11, 29, 22, 13, 13, tzinfo=UTC),
        "bom_serial": serial,
    }
    values.update(changes)
    return BundleInput(**values)


def test_it_writes_aicrs_example_bundle_byte_for_byte() -> None:
    bundle = build_summary_bundle(_example_input())

    assert sorted(bundle.files) == list(EXAMPLE_FILES)
    for name in EXAMPLE_FILES:
        assert bundle.files[name] == _golden(name), name
    assert bundle.statement == _golden("statement.intoto.json")


def test_the_statement_has_aicrs_key_order_and_predicate_fields() -> None:
    statement = json.loads(build_summary_bundle(_example_input()).statement)
    golden = json.loads(_golden("statement.intoto.json"))

    assert list(statement) == ["_type", "subject", "predicateType", "predicate"]
    assert list(statement["predicate"]) == list(golden["predicate"])
    assert statement["predicate"]["redaction"]["version"] == "v2"


def test_full_mode_keeps_stdout_and_has_no_redaction_predicate() -> None:
    bundle = build_summary_bundle(_example_input(redact=False))

    statement = json.loads(bundle.statement)
    assert "redaction" not in statement["predicate"]
    assert b"<script>" not in bundle.files["ctrf/deployment.json"]  # Go escapes < and >
    assert b"\\u003cscript\\u003e" in bundle.files["ctrf/deployment.json"]
    assert b"sysctl" in bundle.files["snapshot.yaml"]


def test_redaction_removes_stdout_messages_and_extras_off_the_allowlist() -> None:
    golden = _golden("ctrf/deployment.json")
    hostile = _unredacted(
        golden,
        message="node ip-10-0-0-1 token=abc",
        stdout=["secret line", "##AICR-EXTRA## {}"],
        extra={
            "nodesValidated": "7",
            "nodesTotal": "123456",  # more than five digits
            "skipReason": "<img src=x>",  # not one of the closed set
            "internalIP": "10.0.0.1",
        },
    )

    redacted = redact_ctrf(hostile)

    doc = json.loads(redacted)
    tests = doc["results"]["tests"]
    assert all("stdout" not in t and "message" not in t for t in tests)
    assert all(t["extra"] == {"nodesValidated": "7"} for t in tests)
    assert b"10.0.0.1" not in redacted
    assert b"secret" not in redacted
    # Nothing else changed: without the kept extra the bytes are AICR's.
    for test in tests:
        del test["extra"]
    assert marshal_indent(doc) == golden


def test_an_extra_that_is_all_disallowed_is_omitted() -> None:
    report = _unredacted(_golden("ctrf/performance.json"), extra={"note": "x"})

    assert redact_ctrf(report) == _golden("ctrf/performance.json")


def test_snapshot_redaction_keeps_only_the_allowlist() -> None:
    snapshot = {
        "kind": "Snapshot",
        "apiVersion": "aicr.run/v1alpha2",
        "metadata": {"timestamp": "t", "version": "v1", "source-node": "gpu-node-7"},
        "measurements": [
            {
                "type": "K8s",
                "subtypes": [
                    {
                        "subtype": "server",
                        "data": {"version": "v1.33.5", "url": "https://10.0.0.1"},
                    },
                    {"subtype": "image", "data": {"a": "b"}},
                ],
            },
            {"type": "SystemD", "subtypes": [{"subtype": "kubelet", "data": {"x": "y"}}]},
            {"type": "GPU", "subtypes": [{"subtype": "hardware", "data": {"model": "H100"}}]},
            "not a measurement",
        ],
    }

    assert redact_snapshot(snapshot) == {
        "kind": "Snapshot",
        "apiVersion": "aicr.run/v1alpha2",
        "metadata": {"timestamp": "t", "version": "v1"},
        "measurements": [
            {"type": "K8s", "subtypes": [{"subtype": "server", "data": {"version": "v1.33.5"}}]},
            {"type": "GPU", "subtypes": [{"subtype": "hardware", "data": {"model": "H100"}}]},
        ],
    }


def test_a_hostile_snapshot_is_refused_with_a_reason() -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
        f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(9)
    )

    with pytest.raises(SnapshotError, match="unreadable snapshot"):
        parse_snapshot(bomb)
    with pytest.raises(SnapshotError, match="not a mapping"):
        parse_snapshot("- just\n- a list\n")
    with pytest.raises(SnapshotError, match="unreadable snapshot"):
        parse_snapshot("key: [unclosed\n")


def test_the_fingerprint_of_a_full_h100_eks_snapshot() -> None:
    snapshot = {
        "measurements": [
            {
                "type": "K8s",
                "subtypes": [
                    {"subtype": "server", "data": {"version": "v1.33.5-eks-113cf36"}},
                    {"subtype": "node", "data": {"provider": "aws"}},
                ],
            },
            {"type": "OS", "subtypes": [{"subtype": "release", "data": {"ID": "ubuntu"}}]},
            {
                "type": "GPU",
                "subtypes": [{"subtype": "hardware", "data": {"model": "NVIDIA H100 80GB HBM3"}}],
            },
            {
                "type": "NodeTopology",
                "subtypes": [
                    {"subtype": "summary", "data": {"node-count": 4}},
                    {"subtype": "label", "data": {"nvidia.com/gpu.present": "true|g1,g2"}},
                ],
            },
        ]
    }

    fingerprint = fingerprint_of(snapshot)
    match = criteria_match(
        {"service": "eks", "accelerator": "h100", "os": "ubuntu", "intent": "training"},
        fingerprint,
    )

    assert fingerprint["k8sVersion"] == {"source": "k8s.server.version", "value": "1.33.5"}
    assert fingerprint["service"]["value"] == "eks"
    assert fingerprint["accelerator"]["value"] == "h100"
    assert fingerprint["nodeCount"]["value"] == 4
    assert fingerprint["gpuNodeCount"]["value"] == 2
    assert fingerprint["os"] == {"source": "os.release", "value": "ubuntu"}
    assert match["matched"] is True
    by_dim = {d["dimension"]: d["match"] for d in match["perDimension"]}
    assert by_dim == {
        "service": "matched",
        "accelerator": "matched",
        "os": "matched",
        "intent": "unknown",
        "platform": "matched",
        "nodes": "matched",
    }
    assert criteria_match({"accelerator": "gb200"}, fingerprint)["matched"] is False


def test_readings_that_are_not_scalars_are_dropped_not_a_crash() -> None:
    snapshot = parse_snapshot(
        "kind: Snapshot\n"
        "fingerprint: {service: {value: eks, x: {1: 2}}, os: {value: .inf}, junk: [1]}\n"
        "metadata: {timestamp: 2026-01-01T00:00:00Z, version: [x], source-node: n1}\n"
        "measurements:\n"
        "  - type: K8s\n"
        "    subtypes:\n"
        "      - subtype: server\n"
        "        data: {version: v1.33.5, platform: .inf, goVersion: {1: x}}\n"
    )

    bundle = build_summary_bundle(_example_input(snapshot=snapshot))

    assert yaml.safe_load(bundle.files["snapshot.yaml"]) == {
        "fingerprint": {"service": {"value": "eks"}},
        "kind": "Snapshot",
        "measurements": [
            {"subtypes": [{"data": {"version": "v1.33.5"}, "subtype": "server"}], "type": "K8s"}
        ],
        "metadata": {"timestamp": datetime(2026, 1, 1, tzinfo=UTC)},
    }


def test_a_v3_bundle_names_the_v3_digest_and_verifies_against_its_recipe_yaml() -> None:
    from evidence_app.verification.summary_bundle import check_summary_files

    bundle = build_summary_bundle(
        _example_input(predicate_type="https://aicr.run/recipe-evidence/v3")
    )
    statement = json.loads(bundle.statement)

    # AICR-V1.md §2's derived V3 digest of this very recipe.yaml
    v3 = "7e1624a8f1aaeee2ae8b74197ad0ebb66f5f577da96c12e891c91c22536ae6a0"
    assert statement["predicateType"] == "https://aicr.run/recipe-evidence/v3"
    assert statement["subject"][0]["digest"]["sha256"] == v3
    assert statement["predicate"]["recipe"]["digest"] == v3
    assert "profile" not in statement["predicate"]
    assert bundle.files["recipe.yaml"] == _golden("recipe.yaml")
    assert check_summary_files(bundle.files).recipe_digests is not None


def test_the_digests_that_ran_fill_the_predicate_and_the_bom_and_nothing_else_changes() -> None:
    """Only what AICR leaves empty changes: ``validatorImages[].digest`` and the BOM's
    ``aicr:image:digest``; an image that ran under two digests (its tag moved between two
    pods) is listed once per digest; an image that did not run keeps AICR's empty digest."""
    deployment, performance, conformance = _example_input().validator_images
    first, second = "sha256:" + "1" * 64, "sha256:" + "2" * 64
    plain = build_summary_bundle(_example_input())
    bundle = build_summary_bundle(
        _example_input(image_digests={deployment: (second, first), performance: (first,)})
    )

    predicate = json.loads(bundle.statement)["predicate"]
    assert predicate["validatorImages"] == [
        {"digest": "", "image": conformance},
        {"digest": first, "image": deployment},
        {"digest": second, "image": deployment},
        {"digest": first, "image": performance},
    ]
    bom = json.loads(bundle.files["bom.cdx.json"])
    containers = [c for c in bom["components"] if c["type"] == "container"]
    digests = [
        (
            c["bom-ref"],
            next(p["value"] for p in c["properties"] if p["name"] == "aicr:image:digest"),
        )
        for c in containers
    ]
    assert digests == [
        (f"img:{deployment}@{first}", first),
        (f"img:{deployment}@{second}", second),
        (f"img:{performance}", first),
        (f"img:{conformance}", ""),
    ]
    assert (
        predicate["bom"]["imageCount"]
        == json.loads(plain.statement)["predicate"]["bom"]["imageCount"] + 1
    )
    for name in ("recipe.yaml", "snapshot.yaml", *(f"ctrf/{p}.json" for p in PHASES)):
        assert bundle.files[name] == plain.files[name], name  # the CTRF keeps AICR's bytes
