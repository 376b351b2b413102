"""End to end with real parts (a Celery worker process, Redis, PostgreSQL, the real
``kubernetes`` client against simulated clusters): a cluster's scheduling settings decide
where AICR's pods land and whether its images pull.

* a GKE-style GPU pool tainted ``nvidia.com/gpu=present:NoSchedule`` passes with AICR's
  default agent (tolerate every taint); with ``agent_tolerations: []`` the agent stays Pending
  and the run ends ``error`` with the agent's message;
* a private registry passes with the cluster's pull secret and fails without it, each check
  ``other`` with the kubelet's image-pull message (AICR's HandleTimeout reading of the pod).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from tests.k8s_sim import SCENARIOS, SimulatedCluster
from tests.k8s_sim.scenarios import PRIVATE_REGISTRY
from tests.validators_app import test_runs_worker as worker_tests
from tests.validators_app.runs_support import RECIPE
from tests.validators_app.test_runs_worker import finished, wait_for
from validators_app.models import CheckStatus, Cluster, RunStatus, ValidationRun
from validators_app.orchestrator import resolve_image
from validators_app.services import clusters, runs

pytestmark = pytest.mark.django_db(transaction=True)
SNAPSHOT_TIMEOUT_S = 3
# The worker fixtures of test_runs_worker (Redis broker, shared settings, worker processes).
broker, site, start_worker = worker_tests.broker, worker_tests.site, worker_tests.start_worker


def register(sim: SimulatedCluster, name: str, **settings: Any) -> Cluster:
    return clusters.cluster_register(
        name=name, kubeconfig_text=sim.kubeconfig, environment="simulated", settings=settings
    )


def start(cluster: Cluster) -> ValidationRun:
    return runs.run_start(cluster=cluster, recipe_name=RECIPE, phases=["deployment"])


def scenario(name: str) -> Any:
    return replace(SCENARIOS[name], check_seconds={})


def test_a_tainted_gpu_pool_passes_unless_the_agent_opts_out_of_tolerations(
    start_worker: Callable, site: dict[str, str]
) -> None:
    site["VALIDATION_SNAPSHOT_TIMEOUT_SECONDS"] = str(SNAPSHOT_TIMEOUT_S)
    worker = start_worker()
    with (
        SimulatedCluster(scenario("gke-tainted-gpu-pool")) as default,
        SimulatedCluster(scenario("gke-tainted-gpu-pool")) as opted_out,
    ):
        passing = start(register(default, "gke-default"))
        pending = start(register(opted_out, "gke-no-tolerations", agent_tolerations=[]))
        for run in (passing, pending):
            wait_for(finished(run), f"run {run.pk} to finish", logs=[worker])
        pods = opted_out.objects("Pod", "aicr-validation")
    assert passing.status == RunStatus.PASSED, passing.error
    assert {c.status for c in passing.checks.all()} == {CheckStatus.PASSED}
    assert pending.status == RunStatus.ERROR
    assert pending.error == (
        f"snapshot agent Job aicr-validate did not complete within {SNAPSHOT_TIMEOUT_S}s"
    )
    assert (pending.ctrf, pending.evidence) == (None, None)
    assert pods == []  # the agent's Job and its Pending pod were deleted with the run


def test_a_private_registry_passes_with_the_pull_secret_and_fails_without(
    start_worker: Callable, site: dict[str, str]
) -> None:
    site["AICR_VALIDATOR_IMAGE_REGISTRY"] = PRIVATE_REGISTRY  # the site's mirror
    worker = start_worker()
    with (
        SimulatedCluster(scenario("private-registry")) as with_secret,
        SimulatedCluster(scenario("private-registry")) as without,
    ):
        passing = start(register(with_secret, "mirror-regcred", image_pull_secrets=["regcred"]))
        failing = start(register(without, "mirror-no-secret"))
        for run in (passing, failing):
            wait_for(finished(run), f"run {run.pk} to finish", logs=[worker])
    assert passing.status == RunStatus.PASSED, passing.error
    assert failing.status == RunStatus.FAILED, failing.error
    image = resolve_image(
        "ghcr.io/nvidia/aicr-validators/deployment:latest",
        aicr_version=failing.aicr_version,
        image_registry=PRIVATE_REGISTRY,
    )
    assert image.startswith(f"{PRIVATE_REGISTRY}/aicr-validators/deployment:")
    checks = list(failing.checks.order_by("position"))
    assert checks
    for check in checks:
        assert (check.status, check.exit_code) == (CheckStatus.OTHER, -1)
        assert check.message.startswith(f'ImagePullBackOff: Back-off pulling image "{image}"')
