"""Job plan, names, durations and image rules (AICR-VALIDATE.md §4.3, §5, §6.1)."""

from __future__ import annotations

import hashlib

import pytest
import yaml

from tests.shared_data import EVIDENCE_EXAMPLE_BUNDLE, VALIDATOR_CATALOG
from validators_app.orchestrator import generate_run_id, job_name, resolve_image
from validators_app.orchestrator.images import default_agent_image, pull_policy
from validators_app.orchestrator.plan import (
    ImageSettings,
    PreflightError,
    catalog_entries,
    go_duration,
    parse_go_duration,
    render_job,
    select_checks,
    validation_input,
)

RUN_ID = "20260819-101500-0123456789abcdef"

# AICR-VALIDATE.md §5, the rendered example (release CLI v0.19.0, check operator-health).
EXPECTED_JOB = """
apiVersion: batch/v1
kind: Job
metadata:
  name: aicr-operator-health-HEX
  namespace: aicr-validation
  labels:
    app.kubernetes.io/name: aicr
    app.kubernetes.io/component: validation
    app.kubernetes.io/managed-by: aicr
    aicr.run/job-type: validation
    aicr.run/run-id: 20260819-101500-0123456789abcdef
    aicr.run/validator: operator-health
    aicr.run/phase: deployment
spec:
  activeDeadlineSeconds: 120
  backoffLimit: 0
  ttlSecondsAfterFinished: 3600
  template:
    metadata:
      labels:
        app.kubernetes.io/name: aicr
        app.kubernetes.io/component: validation
        aicr.run/validator: operator-health
    spec:
      serviceAccountName: aicr-validator-20260819-101500-0123456789abcdef
      restartPolicy: Never
      terminationGracePeriodSeconds: 30
      imagePullSecrets: []
      tolerations: [{operator: Exists}]
      affinity:
        nodeAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
          - weight: 100
            preference:
              matchExpressions: [{key: nvidia.com/gpu.present, operator: DoesNotExist}]
      containers:
      - name: validator
        image: ghcr.io/nvidia/aicr-validators/deployment:v0.19.0
        imagePullPolicy: IfNotPresent
        args: ["operator-health"]
        env:
        - {name: AICR_SNAPSHOT_PATH,   value: /data/snapshot/snapshot.yaml}
        - {name: AICR_VALIDATION_PATH, value: /data/validation/validation.yaml}
        - {name: AICR_VALIDATOR_NAME,  value: operator-health}
        - {name: AICR_VALIDATOR_PHASE, value: deployment}
        - {name: AICR_RUN_ID,          value: 20260819-101500-0123456789abcdef}
        - name: AICR_NAMESPACE
          valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
        - {name: AICR_CHECK_TIMEOUT,   value: 2m0s}
        - {name: AICR_CLI_VERSION,     value: v0.19.0}
        resources:
          requests: {cpu: "1", memory: 1Gi}
          limits:   {cpu: "1", memory: 1Gi}
        terminationMessagePath: /dev/termination-log
        terminationMessagePolicy: File
        volumeMounts:
        - {name: snapshot,   mountPath: /data/snapshot,   readOnly: true}
        - {name: validation, mountPath: /data/validation, readOnly: true}
      volumes:
      - {name: snapshot,   configMap: {name: aicr-snapshot-20260819-101500-0123456789abcdef}}
      - {name: validation, configMap: {name: aicr-validation-20260819-101500-0123456789abcdef}}
"""


@pytest.fixture(scope="module")
def catalog() -> list:
    return catalog_entries(yaml.safe_load(VALIDATOR_CATALOG.read_text()))


@pytest.fixture(scope="module")
def recipe() -> dict:
    return yaml.safe_load((EVIDENCE_EXAMPLE_BUNDLE / "recipe.yaml").read_text())


def test_it_renders_the_documented_job(catalog: list, recipe: dict) -> None:
    entry = next(e for e in catalog if e.name == "operator-health")
    job = render_job(
        entry,
        run_id=RUN_ID,
        namespace="aicr-validation",
        recipe=recipe,
        images=ImageSettings("v0.19.0"),
    )
    expected = yaml.safe_load(
        EXPECTED_JOB.replace(
            "HEX", hashlib.sha256(f"{RUN_ID}/operator-health".encode()).hexdigest()[:8]
        )
    )
    assert job == expected
    env = [e["name"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]]
    assert env[:7] == [
        "AICR_SNAPSHOT_PATH", "AICR_VALIDATION_PATH", "AICR_VALIDATOR_NAME", "AICR_VALIDATOR_PHASE",
        "AICR_RUN_ID", "AICR_NAMESPACE", "AICR_CHECK_TIMEOUT",
    ]  # fmt: skip


def test_env_order_with_commit_and_overrides(catalog: list, recipe: dict) -> None:
    entry = next(e for e in catalog if e.name == "inference-perf")
    images = ImageSettings("v0.19.0", commit="abc1234", registry="mirror.local:5000", tag="v9")
    job = render_job(entry, run_id=RUN_ID, namespace="ns", recipe=recipe, images=images)
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert [e["name"] for e in container["env"]][7:] == [
        "AICR_CLI_VERSION", "AICR_CLI_COMMIT",
        "AICR_VALIDATOR_IMAGE_REGISTRY", "AICR_VALIDATOR_IMAGE_TAG",
    ]  # fmt: skip
    assert container["env"][6]["value"] == "1h5m0s"  # 65m catalog timeout
    assert job["spec"]["activeDeadlineSeconds"] == 3900
    assert container["image"] == "mirror.local:5000/aicr-validators/performance:v9"
    assert container["imagePullPolicy"] == "Always"  # a tag override


def test_dependency_affinity_for_ai_service_metrics(catalog: list, recipe: dict) -> None:
    entry = next(e for e in catalog if e.name == "ai-service-metrics")
    job = render_job(
        entry, run_id=RUN_ID, namespace="ns", recipe=recipe, images=ImageSettings("dev")
    )
    pod_affinity = job["spec"]["template"]["spec"]["affinity"]["podAffinity"]
    assert pod_affinity == {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 100,
                "podAffinityTerm": {
                    "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
                    "namespaces": ["monitoring"],
                    "topologyKey": "kubernetes.io/hostname",
                },
            }
        ]
    }
    no_prom = {
        **recipe,
        "componentRefs": [
            c for c in recipe["componentRefs"] if c["name"] != "kube-prometheus-stack"
        ],
    }
    job = render_job(
        entry, run_id=RUN_ID, namespace="ns", recipe=no_prom, images=ImageSettings("dev")
    )
    assert "podAffinity" not in job["spec"]["template"]["spec"]["affinity"]  # preferred: omitted


@pytest.mark.parametrize(
    ("version", "commit", "tag", "registry", "expected"),
    [
        ("v0.19.0", "", "", "", "ghcr.io/nvidia/aicr-validators/deployment:v0.19.0"),
        ("0.19.0", "", "", "", "ghcr.io/nvidia/aicr-validators/deployment:v0.19.0"),
        ("v0.19.0-rc.1", "", "", "", "ghcr.io/nvidia/aicr-validators/deployment:v0.19.0-rc.1"),
        (
            "v0.20.0-next",
            "0123abc",
            "",
            "",
            "ghcr.io/nvidia/aicr-validators/deployment:sha-0123abc",
        ),
        ("dev", "", "", "", "ghcr.io/nvidia/aicr-validators/deployment:latest"),
        ("dev", "unknown", "", "", "ghcr.io/nvidia/aicr-validators/deployment:latest"),
        (
            "dev",
            "ABCDEF1",
            "",
            "",
            "ghcr.io/nvidia/aicr-validators/deployment:latest",
        ),  # not lowercase
        ("dev", "", "t1", "", "ghcr.io/nvidia/aicr-validators/deployment:t1"),
        ("v1.0.0", "", "", "localhost:5001", "localhost:5001/aicr-validators/deployment:v1.0.0"),
    ],
)
def test_image_tag_rules(version: str, commit: str, tag: str, registry: str, expected: str) -> None:
    image = "ghcr.io/nvidia/aicr-validators/deployment:latest"
    assert (
        resolve_image(
            image, aicr_version=version, aicr_commit=commit, image_tag=tag, image_registry=registry
        )
        == expected
    )


def test_pinned_tags_and_digests_are_kept() -> None:
    assert resolve_image("ghcr.io/x/y/z:v1.2.3", aicr_version="v0.19.0") == "ghcr.io/x/y/z:v1.2.3"
    digest = "ghcr.io/x/y/z@sha256:" + "a" * 64
    assert resolve_image(digest, aicr_version="v0.19.0", image_tag="t") == digest


def test_pull_policy_rules() -> None:
    assert pull_policy("ko.local/x:latest") == "Never"
    assert pull_policy("kind.local/x:v1") == "Never"
    assert pull_policy("r/x@sha256:" + "0" * 64, tag_override="t") == "IfNotPresent"
    assert pull_policy("r/x:v1", tag_override="v1") == "Always"
    assert pull_policy("r/x:latest") == "Always"
    assert pull_policy("r/x:v1") == "IfNotPresent"
    assert default_agent_image("v0.19.0") == "ghcr.io/nvidia/aicr:v0.19.0"
    assert default_agent_image("dev") == "ghcr.io/nvidia/aicr:latest"
    assert default_agent_image("v0.20.0-next") == "ghcr.io/nvidia/aicr:latest"


def test_go_durations() -> None:
    assert [go_duration(s) for s in (120, 480, 1800, 3900, 45, 0, 3600)] == [
        "2m0s", "8m0s", "30m0s", "1h5m0s", "45s", "0s", "1h0m0s",
    ]  # fmt: skip
    assert [parse_go_duration(s) for s in ("2m", "65m", "1h5m", "90s", "1.5h", "0")] == [
        120,
        3900,
        3900,
        90,
        5400,
        0,
    ]
    with pytest.raises(ValueError, match="invalid duration"):
        parse_go_duration("5 minutes")


def test_job_names_are_deterministic_per_run_and_check() -> None:
    name = job_name(RUN_ID, "check-nvidia-smi")
    digest = hashlib.sha256(f"{RUN_ID}/check-nvidia-smi".encode()).hexdigest()
    assert name == f"aicr-check-nvidia-smi-{digest[:8]}"
    assert job_name(RUN_ID, "check-nvidia-smi") == name
    assert job_name("20260819-101500-ffffffffffffffff", "check-nvidia-smi") != name
    with pytest.raises(PreflightError):
        job_name(RUN_ID, "Bad_Name")
    assert len(generate_run_id()) == 32


def test_checks_run_in_catalog_order(catalog: list) -> None:
    recipe = {
        "validation": {
            "conformance": {
                "checks": [
                    "platform-health",
                    "gpu-operator-health",
                    "dra-support",
                    "accelerator-metrics",
                    "ai-service-metrics",
                ]
            }
        }
    }
    assert [e.name for e in select_checks(recipe, catalog, "conformance")] == [
        "dra-support", "accelerator-metrics", "ai-service-metrics",
        "gpu-operator-health", "platform-health",
    ]  # fmt: skip
    assert select_checks(recipe, catalog, "deployment") == []


def test_preflight_refuses_unknown_or_misplaced_checks(catalog: list) -> None:
    with pytest.raises(PreflightError, match="'no-such-check' is not found"):
        select_checks(
            {"validation": {"deployment": {"checks": ["no-such-check"]}}}, catalog, "deployment"
        )
    with pytest.raises(
        PreflightError, match="dra-support"
    ):  # a conformance check declared in deployment
        select_checks(
            {"validation": {"deployment": {"checks": ["dra-support"]}}}, catalog, "deployment"
        )


def test_validation_input_carries_thresholds_and_components(recipe: dict) -> None:
    doc = validation_input(recipe, gpu_allocation_policy="device-plugin-extended-resource")
    assert doc["gpuAllocationPolicy"] == "device-plugin-extended-resource"
    assert "gpuAllocationPolicy" not in validation_input(recipe, gpu_allocation_policy="")
    assert doc["apiVersion"] == "validator.nvidia.com/v1alpha1"
    assert doc["kind"] == "ValidationInput"
    assert doc["config"]["performance"]["constraints"] == [
        {"name": "nccl-all-reduce-bw", "value": ">= 300"}
    ]
    assert doc["criteria"]["service"] == "eks"
    assert [c["name"] for c in doc["componentRefs"]] == [c["name"] for c in recipe["componentRefs"]]
    assert doc["metadata"] == {"version": "dev"}
