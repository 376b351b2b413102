"""Evidence for the snapshot-check tests, published the real way: an AICR summary bundle built
from a given snapshot (``attestation.build_summary_bundle``), signed with a registered key and
stored through the verify-before-count ingest."""

from __future__ import annotations

import copy
import uuid
from datetime import UTC, datetime
from functools import cache
from typing import Any

import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from evidence_app.attestation import (
    BundleInput,
    RecipeInput,
    build_summary_bundle,
    sign_statement,
    summary_tarball,
)
from evidence_app.models import Evidence
from evidence_app.services.ingest import evidence_ingest
from evidence_app.services.keys import signing_key_register
from recipes_app.models import Recipe
from tests.shared_data import EVIDENCE_EXAMPLE_BUNDLE

PHASES = ("deployment", "performance", "conformance")


def full_snapshot(**changes: Any) -> dict[str, Any]:
    """A complete cluster snapshot (every identity recorded); ``changes`` override readings:
    ``kernel``, ``driver``, ``gpu_operator``, ``k8s``, ``gpu_count``, ``aicr``."""
    values = {
        "k8s": "v1.33.5-eks-113cf36",
        "kernel": "6.8.0-1015-aws",
        "driver": "580.95.05",
        "gpu_operator": "v25.10.1",
        "gpu_count": 8,
        "aicr": "v0.19.0",
        **changes,
    }
    return {
        "apiVersion": "aicr.run/v1alpha2",
        "kind": "Snapshot",
        "metadata": {"timestamp": "2026-11-30T10:00:00Z", "version": values["aicr"]},
        "measurements": [
            {
                "type": "K8s",
                "subtypes": [
                    {"subtype": "server", "data": {"version": values["k8s"]}},
                    {
                        "subtype": "node",
                        "data": {
                            "provider": "aws",
                            "kernel-version": values["kernel"],
                            "os-image": "Ubuntu 24.04.3 LTS",
                        },
                    },
                    {
                        "subtype": "helm",
                        "data": {
                            "gpu-operator.chart": "gpu-operator",
                            "gpu-operator.version": values["gpu_operator"],
                            "nvidia-dra-driver-gpu.chart": "nvidia-dra-driver-gpu",
                            "nvidia-dra-driver-gpu.version": "25.12.0",
                        },
                    },
                    {"subtype": "policy", "data": {"driver.version": values["driver"]}},
                ],
            },
            {
                "type": "OS",
                "subtypes": [
                    {"subtype": "release", "data": {"ID": "ubuntu", "VERSION_ID": "24.04"}},
                    {"subtype": "sysctl", "data": {"/proc/sys/kernel/osrelease": values["kernel"]}},
                ],
            },
            {
                "type": "GPU",
                "subtypes": [
                    {
                        "subtype": "hardware",
                        "data": {
                            "gpu-present": True,
                            "gpu-count": values["gpu_count"],
                            "model": "NVIDIA H100 80GB HBM3",
                        },
                    }
                ],
            },
            {
                "type": "NodeTopology",
                "subtypes": [
                    {"subtype": "summary", "data": {"node-count": 2}},
                    {
                        "subtype": "label",
                        "data": {
                            "node.kubernetes.io/instance-type": "p5.48xlarge|gpu-1,gpu-2",
                            "nvidia.com/gpu.present": "true|gpu-1,gpu-2",
                        },
                    },
                ],
            },
        ],
    }


def as_yaml(snapshot: dict[str, Any]) -> str:
    return yaml.safe_dump(snapshot, sort_keys=False)


@cache
def _reports() -> dict[str, bytes]:
    return {p: (EVIDENCE_EXAMPLE_BUNDLE / "ctrf" / f"{p}.json").read_bytes() for p in PHASES}


_KEYS: dict[str, ec.EllipticCurvePrivateKey] = {}


def lab_key(lab: str) -> ec.EllipticCurvePrivateKey:
    """One private key per lab name, registered (so its evidence counts) on first use."""
    if lab not in _KEYS:
        _KEYS[lab] = ec.generate_private_key(ec.SECP256R1())
    key = _KEYS[lab]
    pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    from evidence_app.models import SigningKey
    from evidence_app.services.keys import public_key_inspect

    if not SigningKey.objects.filter(fingerprint=public_key_inspect(pem).fingerprint).exists():
        signing_key_register(name=f"{lab} (tests)", public_key_pem=pem)
    return key


def publish(
    recipe: Recipe,
    snapshot: dict[str, Any],
    *,
    lab: str = "lab-a",
    attested_at: datetime | None = None,
    redact: bool = False,
    aicr_version: str = "v0.19.0",
) -> Evidence:
    """Build, sign and ingest one evidence directory; the stored row."""
    bundle = build_summary_bundle(
        BundleInput(
            recipe=RecipeInput.of(recipe),
            snapshot=copy.deepcopy(snapshot),
            phase_reports=_reports(),
            aicr_version=aicr_version,
            validator_catalog_version="1.0.0",
            validator_images=[f"ghcr.io/nvidia/aicr-validators/{p}:{aicr_version}" for p in PHASES],
            attested_at=attested_at or datetime.now(UTC).replace(microsecond=0),
            bom_serial=f"urn:uuid:{uuid.uuid4()}",
            redact=redact,
        )
    )
    data = summary_tarball(bundle.files, sign_statement(bundle.statement, lab_key(lab)))
    outcome = evidence_ingest(
        data=data, artifact=None, filename="evidence.tar.gz", user=None, channel="api"
    )
    assert outcome.ok, outcome.reason
    assert outcome.evidence is not None
    return outcome.evidence
