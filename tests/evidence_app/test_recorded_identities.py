"""Every identity recorded at ingest (``Evidence.identities``, ``coverage.recorded``): its value,
source and tri-state (recorded / redacted by the bundle's own ``redaction`` block / not
recorded), for AICR's own redacted example bundle and for bundles signed and ingested the real
way; and migration 0011's backfill of rows stored before it."""

from __future__ import annotations

import importlib
import json
from typing import Any

import pytest
from django.apps import apps

from evidence_app.coverage.recorded import (
    NOT_RECORDED,
    RECORDED,
    REDACTED,
    Expected,
    differences,
    identity,
    image_identity,
    recorded_identities,
    split_image,
)
from evidence_app.models import Container, Evidence
from recipes_app.models import Recipe
from tests.evidence_app.coverage_data import full_snapshot, publish
from tests.evidence_factories import EvidenceFactory, example_files, tarball

pytestmark = pytest.mark.usefixtures("evidence_db")
DIGEST_A = "sha256:" + "a" * 64


def state(record: dict[str, Any], key: str) -> tuple[str | None, str, str]:
    found = identity(record, key)
    return found.value, found.state, found.source


def test_aicrs_redacted_example_bundle_names_what_its_redaction_removed(
    example_recipe: Recipe,
) -> None:
    files = example_files()
    predicate = json.loads(files["summary-bundle/statement.intoto.json"])["predicate"]
    row = EvidenceFactory(
        recipe=example_recipe,
        container=Container.SUMMARY_BUNDLE,
        content=tarball(files),
        predicate=predicate,
    )
    record = Evidence.objects.get(pk=row.pk).identities
    assert record["redaction"]["policy"] == "minimal"
    assert "snapshot.measurements.allowlist" in record["redaction"]["applied"]
    # Removed by AICR's minimal allowlist: redacted, never "not recorded", never a value.
    for key in ("instance_type", "driver", "gpu_operator", "dra_driver", "fabric", "kernel"):
        assert state(record, key) == (None, REDACTED, ""), key
    # Kept by the allowlist but absent from this bundle: not recorded.
    for key in ("node_image", "gpu_count", "workload_images"):
        assert state(record, key) == (None, NOT_RECORDED, ""), key
    assert state(record, "aicr_version") == ("v0.19.0-example", RECORDED, "predicate")
    assert state(record, "k8s_version") == ("1.33.0", RECORDED, "snapshot")
    # The predicate lists the validator images with an empty digest: named, digest not recorded.
    validators = [i for i in record["images"] if i["role"] == "validator"]
    assert [i["image"] for i in validators] == [
        "ghcr.io/nvidia/aicr-validators/conformance",
        "ghcr.io/nvidia/aicr-validators/deployment",
        "ghcr.io/nvidia/aicr-validators/performance",
    ]
    conformance = image_identity(record, "ghcr.io/nvidia/aicr-validators/conformance", "v")
    assert conformance.state == NOT_RECORDED


def test_a_full_bundle_records_the_tuple_from_its_snapshot_and_recipe(
    example_recipe: Recipe,
) -> None:
    stored = publish(example_recipe, full_snapshot(), redact=False)
    record = Evidence.objects.get(pk=stored.pk).identities
    assert record["redaction"] is None
    assert state(record, "instance_type") == ("p5.48xlarge", RECORDED, "snapshot")
    assert state(record, "driver") == ("580.95.05", RECORDED, "snapshot")
    assert state(record, "gpu_operator") == ("v25.10.1", RECORDED, "snapshot")
    assert state(record, "node_image") == ("Ubuntu 24.04.3 LTS", RECORDED, "snapshot")
    assert state(record, "kernel") == ("6.8.0-1015-aws", RECORDED, "snapshot")
    # No NetworkTopology measurement in an unredacted snapshot: the fabric is not recorded.
    assert state(record, "fabric") == (None, NOT_RECORDED, "")
    # Resolved from the bundle's recipe.yaml with the catalog's values files, as aicr validate.
    assert state(record, "gpu_allocation") == (
        "device-plugin-extended-resource",
        RECORDED,
        "recipe",
    )


def test_the_same_snapshot_redacted_keeps_what_the_allowlist_keeps(example_recipe: Recipe) -> None:
    stored = publish(example_recipe, full_snapshot(), redact=True)
    record = Evidence.objects.get(pk=stored.pk).identities
    assert state(record, "instance_type") == (None, REDACTED, "")
    assert state(record, "driver") == (None, REDACTED, "")
    # K8s.node kernel-version and os-image are on the allowlist.
    assert state(record, "kernel") == ("6.8.0-1015-aws", RECORDED, "snapshot")
    assert state(record, "node_image") == ("Ubuntu 24.04.3 LTS", RECORDED, "snapshot")


def test_migration_0011_fills_rows_stored_before_it(example_recipe: Recipe) -> None:
    stored = publish(example_recipe, full_snapshot(), redact=False)
    expected = Evidence.objects.get(pk=stored.pk).identities
    Evidence.objects.update(identities={})
    migration = importlib.import_module("evidence_app.migrations.0011_releases_recorded_identities")
    migration.fill_identities(apps, None)
    assert Evidence.objects.get(pk=stored.pk).identities == expected


def test_images_from_the_bom_and_network_topology() -> None:
    bom = {
        "components": [
            {
                "type": "container",
                "name": "ghcr.io/nvidia/aicr-validators/deployment",
                "properties": [
                    {"name": "aicr:image:registry", "value": "ghcr.io"},
                    {"name": "aicr:image:repository", "value": "nvidia/aicr-validators/deployment"},
                    {"name": "aicr:image:tag", "value": "v1"},
                    {"name": "aicr:image:digest", "value": DIGEST_A},
                ],
            },
            {"type": "container", "name": "nvcr.io/nvidia/pytorch:25.01-py3"},
        ]
    }
    predicate = {"validatorImages": [{"image": "ghcr.io/nvidia/aicr-validators/deployment:v1"}]}
    snapshot = {
        "measurements": [
            {
                "type": "NetworkTopology",
                "subtypes": [{"subtype": "g0", "data": {"fabricType": "ib"}}],
            }
        ]
    }
    record = recorded_identities(predicate, snapshot=snapshot, bom=bom)
    found = image_identity(record, "ghcr.io/nvidia/aicr-validators/deployment", "validator")
    assert (found.value, found.source) == (
        f"ghcr.io/nvidia/aicr-validators/deployment@{DIGEST_A}",
        "bom",
    )
    assert state(record, "workload_images") == ("nvcr.io/nvidia/pytorch:25.01-py3", RECORDED, "bom")
    assert state(record, "fabric") == ("ib", RECORDED, "snapshot")
    found_diffs = differences(
        record,
        [
            Expected("fabric", "fabric", "roce"),
            Expected("instance_type", "instance type", "p5.48xlarge"),
            Expected(
                "x", "AICR image", "ghcr.io/nvidia/aicr@" + DIGEST_A, image="ghcr.io/nvidia/aicr"
            ),
        ],
    )
    assert [(d.label, d.state, d.recorded) for d in found_diffs] == [
        ("fabric", "differs", "ib"),
        ("instance type", NOT_RECORDED, None),
        ("AICR image", NOT_RECORDED, None),
    ]


@pytest.mark.parametrize(
    ("ref", "parts"),
    [
        ("ghcr.io/a/b:v1", ("ghcr.io/a/b", "v1", "")),
        (f"localhost:5000/a@{DIGEST_A}", ("localhost:5000/a", "", DIGEST_A)),
        (f"ghcr.io/a:v2@{DIGEST_A}", ("ghcr.io/a", "v2", DIGEST_A)),
        ("ghcr.io/a@sha256:short", ("ghcr.io/a", "", "")),
    ],
)
def test_split_image(ref: str, parts: tuple[str, str, str]) -> None:
    assert split_image(ref) == parts
