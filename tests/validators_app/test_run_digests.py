"""A run records the images and digests its pods reported, and its evidence lists them.

End to end, as a maintainer's run goes: ``run_start`` → the Celery task (in-process, eager) →
the orchestrator with the real ``kubernetes`` client → the simulated cluster, whose runtime
reports ``imageID`` in containerd, docker-pullable or config-id form → the run's rows →
``publish_run`` → the verify-before-count ingest. The expected digests are the simulated
registry's (``tests.k8s_sim.images.digest_of``), never read back from what is under test.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client

from evidence_app.services.site_key import generate_pem
from evidence_app.verification.summary_bundle import read_archive
from tests.k8s_sim import SCENARIOS, SimulatedCluster
from tests.k8s_sim.images import digest_of
from tests.validators_app.runs_support import RECIPE, run_on
from validators_app.models import RunStatus, ValidationRun
from validators_app.orchestrator.images import default_agent_image
from validators_app.services import clusters, runs
from validators_app.services.evidence import validator_images
from validators_app.services.runs import validator_catalog

pytestmark = pytest.mark.django_db

DEPLOYMENT_IMAGE = "ghcr.io/nvidia/aicr-validators/deployment:latest"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(autouse=True)
def _settings(settings: Any) -> None:
    cache.clear()
    settings.SITE_SIGNING_KEY = generate_pem().decode()
    settings.SITE_SIGNING_LOCAL_KEY_FILE = None
    settings.VALIDATION_AICR_VERSION = ""
    settings.VALIDATION_AICR_COMMIT = ""
    settings.VALIDATION_AGENT_IMAGE = ""
    settings.VALIDATION_IMAGE_REGISTRY = ""
    settings.VALIDATION_IMAGE_TAG = ""
    settings.VALIDATION_REFUSE_MUTABLE_IMAGES = False
    settings.EVIDENCE_OCI_ENABLED = False
    settings.VALIDATION_SNAPSHOT_TIMEOUT_SECONDS = 30  # a stuck agent fails fast, not in 5 min


def _run(scenario: Any, captures: Any) -> ValidationRun:
    return run_on(scenario, captures, ["deployment"])[0]


def _bundle(run: ValidationRun) -> dict[str, bytes]:
    assert run.evidence is not None
    files = read_archive(bytes(run.evidence.content))
    return {path.removeprefix("summary-bundle/"): data for path, data in files.items()}


@pytest.mark.usefixtures("real_catalog", "eager")
@pytest.mark.parametrize("scenario", ["healthy-h100-eks", "runtime-docker-pullable"])
def test_the_run_and_its_evidence_record_the_digests_that_ran(
    scenario: str, django_capture_on_commit_callbacks: Any, client: Client
) -> None:
    sim = SCENARIOS[scenario]
    run = _run(sim, django_capture_on_commit_callbacks)
    assert run.status == RunStatus.PASSED, run.error
    ran = digest_of(sim, DEPLOYMENT_IMAGE)

    checks = list(run.checks.order_by("position"))
    assert len(checks) == 4
    assert {(c.image, c.image_digest) for c in checks} == {(DEPLOYMENT_IMAGE, ran)}
    agent = default_agent_image(run.aicr_version)
    assert (run.agent_image, run.agent_image_digest) == (agent, digest_of(sim, agent))

    # The published evidence: verified, and its predicate and BOM name what ran.
    assert run.publish_error == ""
    assert run.evidence is not None
    assert run.evidence.verdict == "verified"
    files = _bundle(run)
    predicate = json.loads(files["statement.intoto.json"])["predicate"]
    listed = {i["image"]: i["digest"] for i in predicate["validatorImages"]}
    catalog_images = validator_images(validator_catalog(run.recipe), aicr_version="dev")
    assert sorted(listed) == sorted(catalog_images)  # every catalog image, as AICR lists them
    assert listed.pop(DEPLOYMENT_IMAGE) == ran
    assert set(listed.values()) == {""}  # conformance/performance did not run
    bom = json.loads(files["bom.cdx.json"])
    props = {
        c["name"]: {p["name"]: p["value"] for p in c["properties"]}
        for c in bom["components"]
        if c["type"] == "container"
    }
    assert props["ghcr.io/nvidia/aicr-validators/deployment"]["aicr:image:digest"] == ran
    assert props["ghcr.io/nvidia/aicr-validators/conformance"]["aicr:image:digest"] == ""

    # The API and the run page say which images and digests ran.
    body = client.get(f"/api/v1/runs/{run.pk}/").json()
    assert body["images"][0] == {
        "role": "agent",
        "phase": "snapshot",
        "check": "",
        "image": agent,
        "digest": digest_of(sim, agent),
        "mutable": True,
    }
    assert [(i["role"], i["check"], i["digest"]) for i in body["images"][1:]] == [
        ("validator", c.name, ran) for c in checks
    ]
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert page.count(f'data-digest="{ran}"') == 4
    assert "mutable tag" in page


@pytest.mark.usefixtures("real_catalog", "eager")
def test_a_runtime_that_reports_no_repository_digest_is_recorded_as_not_reported(
    django_capture_on_commit_callbacks: Any, client: Client
) -> None:
    run = _run(SCENARIOS["runtime-config-id"], django_capture_on_commit_callbacks)
    assert run.status == RunStatus.PASSED, run.error
    assert {(c.image, c.image_digest) for c in run.checks.all()} == {(DEPLOYMENT_IMAGE, "")}
    assert run.agent_image == default_agent_image(run.aicr_version)
    assert run.agent_image_digest == ""
    predicate = json.loads(_bundle(run)["statement.intoto.json"])["predicate"]
    assert {i["digest"] for i in predicate["validatorImages"]} == {""}  # nothing invented
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert page.count("not reported by the runtime") == 5  # the agent and four checks


@pytest.mark.usefixtures("real_catalog", "eager")
def test_a_known_commit_runs_sha_tags_and_refusing_mutable_images_stops_before_deploying(
    django_capture_on_commit_callbacks: Any, settings: Any
) -> None:
    sim = SCENARIOS["healthy-h100-eks"]
    settings.VALIDATION_AICR_COMMIT = COMMIT
    pinned = f"ghcr.io/nvidia/aicr@{digest_of(sim, 'ghcr.io/nvidia/aicr:latest')}"
    settings.VALIDATION_AGENT_IMAGE = pinned
    settings.VALIDATION_REFUSE_MUTABLE_IMAGES = True

    run = _run(sim, django_capture_on_commit_callbacks)

    assert run.status == RunStatus.PASSED, run.error
    sha_image = f"ghcr.io/nvidia/aicr-validators/deployment:sha-{COMMIT}"
    assert {(c.image, c.image_digest) for c in run.checks.all()} == {
        (sha_image, digest_of(sim, sha_image))
    }
    assert run.agent_image == pinned
    assert run.agent_image_digest == pinned.rsplit("@", 1)[1]
    predicate = json.loads(_bundle(run)["statement.intoto.json"])["predicate"]
    assert {"image": sha_image, "digest": digest_of(sim, sha_image)} in (
        predicate["validatorImages"]
    )

    # Without the commit the catalog's :latest stays mutable: refused, nothing deployed.
    settings.VALIDATION_AICR_COMMIT = ""
    with SimulatedCluster(sim) as cluster_sim:
        cluster = clusters.cluster_register(
            name="sim-refuse", kubeconfig_text=cluster_sim.kubeconfig, environment="simulated"
        )
        with django_capture_on_commit_callbacks(execute=True):
            refused = runs.run_start(cluster=cluster, recipe_name=RECIPE, phases=["deployment"])
        writes = [(m, p) for m, p in cluster_sim.requests if m in ("POST", "PATCH", "PUT")]
    refused.refresh_from_db()
    assert refused.status == RunStatus.ERROR
    assert refused.error.startswith("mutable images refused (VALIDATION_REFUSE_MUTABLE_IMAGES): ")
    assert f"operator-health: {DEPLOYMENT_IMAGE}" in refused.error
    # The (pinned) agent ran; no validator Job, ServiceAccount or cluster-admin binding did.
    assert ("POST", "/apis/batch/v1/namespaces/aicr-validation/jobs") in writes
    assert [p for _, p in writes if "aicr-validator-" in p or "/jobs/" in p] == []
    assert refused.checks.exclude(status="pending").count() == 0
