"""The check-scoped inputs on a real run (Celery task in process, the real orchestrator and
``kubernetes`` client, the simulated cluster): each reaches only its check's Job on the cluster,
and the HF token, which has to go there in clear as AICR sends it, is stored nowhere else."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from django.core import serializers

from tests.k8s_sim import SCENARIOS, SimulatedCluster
from tests.validators_app.runs_support import publish_nothing
from validators_app.models import CheckRun, RunStatus, ValidationRun
from validators_app.services import clusters, runs

pytestmark = pytest.mark.django_db
RECIPE = "h100-eks-ubuntu-inference-dynamo"  # declares inference-perf
TOKEN = "hf_RunScopedToken0123456789"


def test_the_hf_token_reaches_only_inference_perf_and_is_stored_nowhere(
    eager: None,
    real_catalog: Any,
    django_capture_on_commit_callbacks: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    publish_nothing(monkeypatch)  # evidence is tested elsewhere
    envs: dict[str, dict[str, str]] = {}

    def seen(event: Any) -> None:
        if event.type == "ADDED" and event.resource.kind == "Job":
            spec = event.obj["spec"]["template"]["spec"]
            check = event.obj["metadata"].get("labels", {}).get("aicr.run/validator", "agent")
            envs[check] = {
                e["name"]: e.get("value", "") for c in spec["containers"] for e in c.get("env", [])
            }

    # The inference recipe's readiness needs Kubernetes >= 1.34; 5 s per check keeps it quick.
    scenario = replace(
        SCENARIOS["healthy-h100-eks"], kubernetes_version="v1.34.1-eks-3025e55", check_seconds={}
    )
    with SimulatedCluster(scenario) as sim:
        sim.store.subscribe(seen)
        cluster = clusters.cluster_register(
            name="sim-inference",
            kubeconfig_text=sim.kubeconfig,
            environment="simulated",
            settings={"hf_token": TOKEN, "inference_perf_no_cleanup": True},
        )
        with django_capture_on_commit_callbacks(execute=True):
            run = runs.run_start(cluster=cluster, recipe_name=RECIPE, phases=["performance"])
    run.refresh_from_db()
    # The run went through its checks (its verdict, and publishing, are other tests' matter).
    assert run.status not in (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.ERROR), run.error
    assert run.checks.filter(name="inference-perf").exclude(exit_code=None).exists()
    assert envs["inference-perf"]["HF_TOKEN"] == TOKEN
    assert envs["inference-perf"]["AICR_INFERENCE_PERF_NO_CLEANUP"] == "1"
    others = {check: env for check, env in envs.items() if check != "inference-perf"}
    assert others  # the agent and the other performance checks
    for check, env in others.items():
        assert "HF_TOKEN" not in env, check
        assert "AICR_INFERENCE_PERF_NO_CLEANUP" not in env, check
    stored = serializers.serialize(
        "json", [ValidationRun.objects.get(pk=run.pk), *CheckRun.objects.filter(run=run)]
    )
    assert TOKEN not in stored
