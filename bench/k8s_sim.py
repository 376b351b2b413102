"""The simulated Kubernetes API server's own cost (tests/k8s_sim), through the real client.

Printed, per scenario-free operation, over ``--n`` repetitions (p50 / p95 / max, milliseconds):
GET /version, LIST pods by label, server-side apply of a ConfigMap, a 3 MB pod log read, the
delay between a write and its watch event, and a validator Job from apply to terminal
(simulated 5 s check: 2 ms scheduling + 20 ms container at time_scale 0.001). Then the same
GET from 20 simulated clusters at once (one client thread each): requests per second.
No Django, no database; asserts nothing. Run: ``.venv/bin/python bench/k8s_sim.py [--n 200]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import kubernetes
import yaml
from kubernetes import client, watch

from tests.k8s_sim import SCENARIOS, HugeLogs, SimulatedCluster
from tests.k8s_sim.containers import run_validator

NS = "aicr-validation"
APPLY = {"field_manager": "aicr", "force": True, "_content_type": "application/apply-patch+yaml"}


def api_for(cluster: SimulatedCluster) -> kubernetes.client.ApiClient:
    return kubernetes.config.new_client_from_config_dict(yaml.safe_load(cluster.kubeconfig))


def report(label: str, samples: list[float]) -> None:
    ms = sorted(sample * 1000 for sample in samples)
    p95 = ms[min(len(ms) - 1, int(len(ms) * 0.95))]
    print(
        f"{label:<44} p50 {statistics.median(ms):7.2f}  p95 {p95:7.2f}  max {ms[-1]:7.2f} ms"
        f"  (n={len(ms)})"
    )


def timed(action: Callable[[], object], n: int) -> list[float]:
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return samples


def job(name: str, check: str) -> dict[str, object]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": 120,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "validator",
                            "image": "ghcr.io/nvidia/aicr-validators/deployment:v0.19.0",
                            "args": [check],
                        }
                    ],
                    "volumes": [{"name": "validation", "configMap": {"name": "aicr-validation-x"}}],
                }
            },
        },
    }


def single_cluster(n: int) -> None:
    # operator-health is a plain 5 s check; expected-resources writes the 3 MB hostile log.
    scenario = replace(
        SCENARIOS["huge-logs"], check_seconds={}, huge_logs=HugeLogs(checks=("expected-resources",))
    )
    with SimulatedCluster(scenario) as cluster:
        api = api_for(cluster)
        core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
        core.create_namespace({"metadata": {"name": NS}})
        core.create_namespaced_config_map(
            NS, {"metadata": {"name": "aicr-validation-x"}, "data": {"validation.yaml": "{}"}}
        )
        report("GET /version", timed(lambda: client.VersionApi(api).get_code(), n))
        report(
            "LIST pods by label",
            timed(lambda: core.list_namespaced_pod(NS, label_selector="app=x"), n),
        )
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "applied"},
            "data": {"k": "v"},
        }
        report(
            "server-side apply ConfigMap",
            timed(lambda: core.patch_namespaced_config_map("applied", NS, body, **APPLY), n),
        )

        def run_job(name: str, check: str) -> str:
            rv = batch.create_namespaced_job(NS, job(name, check)).metadata.resource_version
            for event in watch.Watch().stream(
                batch.list_namespaced_job,
                NS,
                field_selector=f"metadata.name={name}",
                resource_version=rv,
                timeout_seconds=10,
            ):
                if any(c.type == "Complete" for c in event["object"].status.conditions or []):
                    break
            selector = f"batch.kubernetes.io/job-name={name}"
            return core.list_namespaced_pod(NS, label_selector=selector).items[0].metadata.name

        def read_log(pod: str) -> bytes:
            answer = core.read_namespaced_pod_log(
                pod, NS, container="validator", _preload_content=False
            )
            return answer.data

        repeats = max(5, n // 10)
        huge = run_job("aicr-expected-resources-00000000", "expected-resources")
        size = len(read_log(huge))
        report(
            f"pod log read ({size / 1e6:.1f} MB, hostile)", timed(lambda: read_log(huge), repeats)
        )
        terminal = []
        for index in range(repeats):
            started = time.perf_counter()
            run_job(f"aicr-operator-health-{index:08x}", "operator-health")
            terminal.append(time.perf_counter() - started)
        report("Job create -> Complete seen (5 s sim check)", terminal)
        report("write -> watch event delivered", [watch_delay(core, i) for i in range(repeats)])


def watch_delay(core: client.CoreV1Api, index: int) -> float:
    """Write a ConfigMap while a watch is open; seconds until its ADDED event arrives."""
    rv = core.list_namespaced_config_map(NS).metadata.resource_version
    arrived: list[float] = []

    def consume() -> None:
        for event in watch.Watch().stream(
            core.list_namespaced_config_map, NS, resource_version=rv, timeout_seconds=5
        ):
            if event["object"].metadata.name == f"probe-{index}":
                arrived.append(time.perf_counter())
                return

    reader = threading.Thread(target=consume)
    reader.start()
    time.sleep(0.05)  # the watch is open
    written = time.perf_counter()
    core.create_namespaced_config_map(NS, {"metadata": {"name": f"probe-{index}"}})
    reader.join()
    return arrived[0] - written


def many_clusters(clusters: int, per_cluster: int) -> None:
    sims = [SimulatedCluster(SCENARIOS["healthy-h100-eks"]).start() for _ in range(clusters)]
    try:
        apis = [api_for(sim) for sim in sims]

        def hammer(api: kubernetes.client.ApiClient) -> None:
            version = client.VersionApi(api)
            for _ in range(per_cluster):
                version.get_code()

        started = time.perf_counter()
        with ThreadPoolExecutor(clusters) as pool:
            list(pool.map(hammer, apis))
        elapsed = time.perf_counter() - started
        total = clusters * per_cluster
        print(
            f"{clusters} clusters x {per_cluster} GET /version in parallel: {elapsed:.2f} s, "
            f"{total / elapsed:.0f} requests/s"
        )
    finally:
        for sim in sims:
            sim.stop()


def huge_log_generation() -> None:
    now = datetime.now(UTC)
    samples = timed(
        lambda: run_validator(
            SCENARIOS["huge-logs"],
            check="operator-health",
            phase="deployment",
            validation_yaml="{}",
            started=now,
        ),
        5,
    )
    report("generate the 3 MB hostile log", samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=200)
    args = parser.parse_args()
    print(
        f"simulated Kubernetes API server, n={args.n}, kubernetes client {kubernetes.__version__}"
    )
    single_cluster(args.n)
    huge_log_generation()
    many_clusters(20, max(10, args.n // 4))


if __name__ == "__main__":
    main()
