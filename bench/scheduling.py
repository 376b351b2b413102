"""What the scheduling settings cost (docs/clusters.md "Scheduling settings").

Printed over ``--n`` repetitions (p50 / p95 / max, milliseconds):

* ``validators_app.scheduling`` checks of the largest accepted input (16 Secrets, 32 selector
  labels, 32 tolerations) and of a typical one;
* ``plan.render_job`` of inference-perf with every setting vs none;
* the simulator's scheduler on ``gke-tainted-gpu-pool``: the agent Job created → its pod bound
  (AICR's default tolerate-all) or refused with FailedScheduling (tolerations []).

No database; asserts nothing. Run: ``DEBUG=1 .venv/bin/python bench/scheduling.py [--n 200]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import kubernetes
import yaml
from kubernetes import client

from tests.k8s_sim import SCENARIOS, SimulatedCluster
from tests.shared_data import EVIDENCE_EXAMPLE_BUNDLE, VALIDATOR_CATALOG
from validators_app import scheduling
from validators_app.orchestrator import CheckInputs, agent
from validators_app.orchestrator.plan import ImageSettings, Scheduling, catalog_entries, render_job

NS = "aicr-validation"
LARGEST = {
    "image_pull_secrets": [f"regcred-{i}.mirror" for i in range(scheduling.MAX_SECRETS)],
    "node_selector": {f"example.com/label-{i}": f"value-{i}" for i in range(32)},
    "tolerations": [
        {"key": f"example.com/taint-{i}", "operator": "Equal", "value": "x", "effect": "NoExecute",
         "tolerationSeconds": 300}
        for i in range(scheduling.MAX_TOLERATIONS)
    ],
}  # fmt: skip
TYPICAL = {
    "image_pull_secrets": ["regcred"],
    "node_selector": {"cloud.google.com/gke-nodepool": "gpu-pool"},
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
}


def timed(action: Callable[[], Any], n: int) -> list[float]:
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        action()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def report(label: str, samples: list[float]) -> None:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    print(
        f"{label:<62} p50 {statistics.median(ordered):8.3f}  p95 {p95:8.3f}  "
        f"max {ordered[-1]:8.3f} ms"
    )


def check_all(values: dict[str, Any]) -> None:
    scheduling.check_image_pull_secrets(values["image_pull_secrets"])
    scheduling.check_node_selector(values["node_selector"])
    scheduling.check_tolerations(values["tolerations"])


def scheduler_samples(n: int, tolerations: list[dict[str, str]] | None) -> list[float]:
    samples = []
    with SimulatedCluster(SCENARIOS["gke-tainted-gpu-pool"]) as cluster:
        api = kubernetes.config.new_client_from_config_dict(yaml.safe_load(cluster.kubeconfig))
        core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
        core.create_namespace({"metadata": {"name": NS}})
        core.create_namespaced_service_account(NS, agent.service_account(NS))
        for i in range(n):
            body = agent.job(NS, "img", {"nvidia.com/gpu.present": "true"}, tolerations=tolerations)
            body["metadata"]["name"] = f"agent-{i}"
            started = time.perf_counter()
            batch.create_namespaced_job(NS, body)
            while True:
                pods = core.list_namespaced_pod(
                    NS, label_selector=f"batch.kubernetes.io/job-name=agent-{i}"
                ).items
                if pods and (pods[0].spec.node_name or pods[0].status.conditions):
                    break
                time.sleep(0.0005)
            samples.append((time.perf_counter() - started) * 1000)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=200)
    n = parser.parse_args().n
    report("check the largest accepted settings (16+32+32)", timed(lambda: check_all(LARGEST), n))
    report("check typical settings (1 each)", timed(lambda: check_all(TYPICAL), n))
    catalog = yaml.safe_load(VALIDATOR_CATALOG.read_text())
    recipe = yaml.safe_load((EVIDENCE_EXAMPLE_BUNDLE / "recipe.yaml").read_text())
    entry = next(e for e in catalog_entries(catalog) if e.name == "inference-perf")
    images = ImageSettings(version="v0.19.0")
    full = Scheduling(
        image_pull_secrets=tuple(LARGEST["image_pull_secrets"]),
        node_selector=LARGEST["node_selector"],
        tolerations=tuple(LARGEST["tolerations"]),
        check_inputs=CheckInputs(hf_token="hf_x", inference_perf_no_cleanup=True),  # noqa: S106 - dummy
    )

    def render(settings: Scheduling | None) -> Callable[[], Any]:
        run_id = "20260819-101500-0123456789abcdef"
        return lambda: render_job(
            entry, run_id=run_id, namespace=NS, recipe=recipe, images=images, scheduling=settings
        )

    report("render_job inference-perf, no settings", timed(render(None), n))
    report("render_job inference-perf, largest settings", timed(render(full), n))
    report(
        "sim: agent Job → pod bound (tolerate-all, tainted GPU pool)", scheduler_samples(n, None)
    )
    report("sim: agent Job → FailedScheduling (tolerations [])", scheduler_samples(n, []))


if __name__ == "__main__":
    main()
