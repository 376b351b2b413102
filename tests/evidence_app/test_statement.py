"""AICR recipe-evidence in-toto statements: strict parsing with errors naming the field."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from evidence_app.verification import StatementError, parse_statement
from evidence_app.verification.statement import PREDICATE_LEGACY_V1, PREDICATE_V2, PREDICATE_V3
from tests.shared_data import AICR, GOLDEN

GOLDEN_STATEMENT = GOLDEN / "generated/evidence-example-full/summary-bundle/statement.intoto.json"
GENERATED_STATEMENT = AICR / "_generated/evidence-example/summary-bundle/statement.intoto.json"
BASE: dict[str, Any] = json.loads(GOLDEN_STATEMENT.read_bytes())


def _payload(change: Callable[[dict[str, Any]], Any] | None = None) -> bytes:
    doc = copy.deepcopy(BASE)
    if change is not None:
        change(doc)
    return json.dumps(doc).encode()


def _v2(doc: dict[str, Any]) -> None:
    doc["predicateType"] = PREDICATE_V2
    doc["predicate"]["profile"] = {
        "selection": "gpuStack=gcp-managed",
        "advertiser": "external",
        "policyDescriptorIdentity": "sha256:" + "ab" * 32,
    }


def test_it_parses_the_evidence_aicr_emits() -> None:
    statement = parse_statement(GOLDEN_STATEMENT.read_bytes())
    assert parse_statement(GENERATED_STATEMENT.read_bytes()) == statement
    assert statement.predicate_version == "v1"
    assert statement.subject.name == "recipe:h100-eks-ubuntu-training-kubeflow"
    assert statement.recipe_name == "h100-eks-ubuntu-training-kubeflow"
    assert statement.recipe_digest == statement.subject.sha256
    assert statement.recipe_digest.startswith("d9e062bf")
    assert statement.attested_at == datetime(2026, 11, 29, 22, 13, 13, tzinfo=UTC)
    assert statement.aicr_version == "v0.19.0-example"
    assert statement.validator_catalog_version == "1.0.0"
    assert len(statement.validator_images) == 3
    assert statement.fingerprint["os"].value == "ubuntu"
    assert statement.fingerprint["os"].version == "24.04"
    assert statement.fingerprint["gpuNodeCount"].value == 0
    assert statement.criteria_match.matched is True
    assert [d.dimension for d in statement.criteria_match.per_dimension][:2] == [
        "service",
        "accelerator",
    ]
    assert set(statement.phases) == {"deployment", "performance", "conformance"}
    assert statement.phases["conformance"].skipped == 13
    assert statement.phases["deployment"].ctrf_digest.startswith("sha256:aaed3a9c")
    assert statement.bom is not None
    assert statement.bom.image_count == 19
    assert statement.manifest is not None
    assert statement.manifest.file_count == 6
    assert statement.redaction is not None
    assert statement.redaction.policy == "minimal"
    assert statement.profile is None
    assert len(statement.statement_sha256) == 64


def test_it_parses_profiled_v2_and_legacy_evidence() -> None:
    v2 = parse_statement(_payload(_v2))
    assert v2.predicate_version == "v2"
    assert v2.profile is not None
    assert (v2.profile.name, v2.profile.value, v2.profile.advertiser) == (
        "gpuStack",
        "gcp-managed",
        "external",
    )
    legacy = parse_statement(
        _payload(lambda d: d.__setitem__("predicateType", PREDICATE_LEGACY_V1))
    )
    assert legacy.predicate_version == "legacy-v1"


def test_it_rejects_predicates_that_are_not_aicr_evidence() -> None:
    slsa = _payload(lambda d: d.__setitem__("predicateType", "https://slsa.dev/provenance/v1"))
    with pytest.raises(StatementError, match="is not AICR recipe evidence") as info:
        parse_statement(slsa)
    assert info.value.field == "predicateType"


def test_it_rejects_things_that_are_not_statements() -> None:
    with pytest.raises(StatementError, match="not evidence") as info:
        parse_statement(None)
    assert info.value.field == "payload"
    with pytest.raises(StatementError) as info:
        parse_statement(GOLDEN_STATEMENT.read_bytes(), payload_type="text/plain")
    assert info.value.field == "payloadType"
    with pytest.raises(StatementError, match="not valid JSON"):
        parse_statement(b"{")
    with pytest.raises(StatementError, match="nesting"):
        parse_statement(b'{"a":' + b"[" * 40 + b"]" * 40 + b"}")


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if value is _DELETE:
            del node[last]
        elif isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return change


_DELETE = object()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (_set("_type", "https://in-toto.io/Statement/v0.1"), "_type"),
        (_set("subject", []), "subject"),
        (lambda d: d["subject"].append(d["subject"][0]), "subject"),
        (_set("subject.0.name", "recipe:other-recipe"), "subject[0].name"),
        (_set("subject.0.name", "ghcr.io/acme/evidence"), "subject[0].name"),
        (_set("subject.0.digest.sha256", "00" * 32), "subject[0].digest.sha256"),
        (_set("subject.0.digest.sha256", "xyz"), "subject[0].digest.sha256"),
        (_set("predicate.recipe.digest", "11" * 32), "subject[0].digest.sha256"),
        (_set("predicate.schemaVersion", "2.0.0"), "predicate.schemaVersion"),
        (_set("predicate.attestedAt", "yesterday"), "predicate.attestedAt"),
        (_set("predicate.attestedAt", "2026-13-40T00:00:00Z"), "predicate.attestedAt"),
        (_set("predicate.aicrVersion", 19), "predicate.aicrVersion"),
        (_set("predicate.aicrVersion", _DELETE), "predicate.aicrVersion"),
        (_set("predicate.validatorCatalogVersion", _DELETE), "predicate.validatorCatalogVersion"),
        (_set("predicate.recipe.name", "Not A Name"), "predicate.recipe.name"),
        (_set("predicate.fingerprint", []), "predicate.fingerprint"),
        (_set("predicate.fingerprint.os.value", {"x": 1}), "predicate.fingerprint.os.value"),
        (_set("predicate.criteriaMatch.matched", "yes"), "predicate.criteriaMatch.matched"),
        (
            _set("predicate.criteriaMatch.perDimension.0.match", True),
            "predicate.criteriaMatch.perDimension[0].match",
        ),
        (_set("predicate.phases", {}), "predicate.phases"),
        (_set("predicate.phases.deployment.passed", -1), "predicate.phases.deployment.passed"),
        (_set("predicate.phases.deployment.passed", True), "predicate.phases.deployment.passed"),
        (_set("predicate.phases.deployment.passed", "1"), "predicate.phases.deployment.passed"),
        (
            _set("predicate.phases.deployment.ctrfDigest", "abc"),
            "predicate.phases.deployment.ctrfDigest",
        ),
        (_set("predicate.bom.digest", "md5:x"), "predicate.bom.digest"),
        (_set("predicate.manifest.fileCount", _DELETE), "predicate.manifest.fileCount"),
        (_set("predicate.validatorImages", {}), "predicate.validatorImages"),
        (_set("predicate.aicrVersion", "v1\nv2"), "predicate.aicrVersion"),
        (_set("predicate.futureField", "x" * 5000), "predicate.futureField"),
        (
            _set("predicate.profile", {"selection": "gpuStack=x", "policyDescriptorIdentity": "d"}),
            "predicate.profile",
        ),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_it_names_the_field_at_fault(change: Callable[[dict[str, Any]], None], field: str) -> None:
    with pytest.raises(StatementError) as info:
        parse_statement(_payload(change))
    assert info.value.field == field, str(info.value)
    assert str(info.value).startswith(field)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (_set("predicate.profile", _DELETE), "predicate.profile"),
        (_set("predicate.profile.selection", "gpuStack"), "predicate.profile.selection"),
        (
            _set("predicate.profile.policyDescriptorIdentity", _DELETE),
            "predicate.profile.policyDescriptorIdentity",
        ),
    ],
)
def test_it_requires_a_coherent_profile_for_v2(
    change: Callable[[dict[str, Any]], None], field: str
) -> None:
    def both(doc: dict[str, Any]) -> None:
        _v2(doc)
        change(doc)

    with pytest.raises(StatementError) as info:
        parse_statement(_payload(both))
    assert info.value.field == field


def test_it_accepts_an_oci_artifact_subject_only_when_asked() -> None:
    payload = _payload(_set("subject.0.name", "ghcr.io/acme/aicr-evidence:h100"))
    statement = parse_statement(payload, allow_artifact_subject=True)
    assert statement.artifact_subject
    assert statement.recipe_name == "h100-eks-ubuntu-training-kubeflow"


def test_it_normalises_rfc3339_offsets_and_fractions() -> None:
    statement = parse_statement(
        _payload(_set("predicate.attestedAt", "2026-11-30T01:13:13.123456789+03:00"))
    )
    assert statement.attested_at == datetime(2026, 11, 29, 22, 13, 13, 123456, tzinfo=UTC)


def _v3(doc: dict[str, Any]) -> None:
    doc["predicateType"] = PREDICATE_V3


def test_it_parses_v3_evidence_with_or_without_a_profile() -> None:
    plain = parse_statement(_payload(_v3))
    assert (plain.predicate_version, plain.profile) == ("v3", None)

    def profiled(doc: dict[str, Any]) -> None:
        _v2(doc)
        _v3(doc)

    with_profile = parse_statement(_payload(profiled))
    assert with_profile.predicate_version == "v3"
    assert with_profile.profile is not None
    assert with_profile.profile.selection == "gpuStack=gcp-managed"


def test_it_refuses_a_profile_under_v1_naming_the_types_that_carry_one() -> None:
    def v1_with_profile(doc: dict[str, Any]) -> None:
        _v2(doc)
        doc["predicateType"] = "https://aicr.run/recipe-evidence/v1"

    with pytest.raises(StatementError, match="recipe-evidence/v3") as info:
        parse_statement(_payload(v1_with_profile))
    assert info.value.field == "predicate.profile"


def test_it_refuses_an_unknown_evidence_version_naming_the_supported_ones() -> None:
    v4 = _payload(lambda d: d.__setitem__("predicateType", "https://aicr.run/recipe-evidence/v4"))

    with pytest.raises(StatementError) as info:
        parse_statement(v4)

    assert info.value.field == "predicateType"
    assert "recipe-evidence/v4" in info.value.message
    assert "does not verify" in info.value.message
    for supported in ("/v1", "/v2", "/v3", "aicr.nvidia.com/recipe-evidence/v1"):
        assert supported in info.value.message
