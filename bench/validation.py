"""Orchestration overhead per check against the simulated cluster (tests/k8s_sim).

"Overhead" is the time a check costs that is not spent waiting for the container: apply the
Job, read it, open the watch, list the pod, read the log, build the outcome, delete the Job and
wait for its pod to go. Waiting is the time blocked inside the Job watch until the Job is
terminal (the simulated scheduler, kubelet and container: 0.5 s + 0.5 s + the check's simulated
run time, times ``time_scale`` 0.001, each at least 10-20 ms of wall time) plus the sleeps between
polls for the deleted Job's pod to go (its 30 s termination grace period, scaled). Per check

    overhead = (check_finished - check_started, from the hooks) - that waiting.

The LIST requests of that polling count as overhead.

Also printed: the snapshot agent and per-run setup/cleanup (once per run, not per check), API
requests per check, and the simulator's own latency per request (GET /version), which is part
of every figure above. No Django, no database; asserts nothing.
Run: ``.venv/bin/python bench/validation.py [--runs 3]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import kubernetes
import yaml

from recipes_app.resolver import read_tree
from tests.k8s_sim import SCENARIOS, SimulatedCluster
from tests.shared_data import EVIDENCE_EXAMPLE_BUNDLE, RECIPES_TREE, VALIDATOR_CATALOG
from validators_app import orchestrator
from validators_app.orchestrator import run as run_module
from validators_app.orchestrator.kube import Kube

BLOCKED = [0.0]  # seconds spent blocked in watch windows, reset per check by the hooks
_watch_jobs = Kube.watch_jobs


def _timed_watch(self: Kube, *args: object, **kwargs: object) -> Iterator[dict]:
    """The orchestrator's watch, with the time blocked waiting for each event counted."""
    events = _watch_jobs(self, *args, **kwargs)  # type: ignore[arg-type]
    try:
        while True:
            started = time.perf_counter()
            try:
                event = next(events)
            except StopIteration:
                return
            finally:
                BLOCKED[0] += time.perf_counter() - started
            yield event
    finally:
        events.close()


Kube.watch_jobs = _timed_watch  # type: ignore[method-assign]
_pause = run_module.pause


def _timed_pause(seconds: float) -> None:
    """Sleeping between polls for a deleted Job's pod to go: the cluster's time, not ours."""
    started = time.perf_counter()
    _pause(seconds)
    BLOCKED[0] += time.perf_counter() - started


run_module.pause = _timed_pause


class TimingHooks:
    def __init__(self) -> None:
        self.started: dict[str, float] = {}
        self.durations: dict[str, float] = {}
        self.waited: dict[str, float] = {}
        self.cpu_started: dict[str, float] = {}
        self.cpu: dict[str, float] = {}  # CPU of the orchestrator's own thread (not the simulator)
        self.snapshot_at = 0.0
        self.first_check_at = 0.0

    def snapshot_taken(self, snapshot_yaml: str, agent_image: str, agent_digest: str) -> None:
        self.snapshot_at = time.perf_counter()

    def phase_started(self, phase: str) -> None:
        pass

    def check_started(self, phase: str, name: str, job_name: str) -> None:
        BLOCKED[0] = 0.0
        self.started[name] = time.perf_counter()
        self.cpu_started[name] = time.thread_time()
        self.first_check_at = self.first_check_at or self.started[name]

    def check_finished(self, outcome: orchestrator.CheckOutcome) -> None:
        self.durations[outcome.name] = time.perf_counter() - self.started[outcome.name]
        self.waited[outcome.name] = BLOCKED[0]
        self.cpu[outcome.name] = time.thread_time() - self.cpu_started[outcome.name]

    def heartbeat(self) -> None:
        pass

    def cancel_requested(self) -> bool:
        return False


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    scenario = SCENARIOS["healthy-h100-eks"]

    recipe = yaml.safe_load((EVIDENCE_EXAMPLE_BUNDLE / "recipe.yaml").read_text())
    catalog = yaml.safe_load(VALIDATOR_CATALOG.read_text())
    tree = read_tree(RECIPES_TREE)  # the values files the allocation policy is resolved from

    overheads: list[float] = []
    waits: list[float] = []
    cpu: list[float] = []
    per_check_requests: list[float] = []
    snapshot_s: list[float] = []
    run_s: list[float] = []
    setup_s: list[float] = []
    latency_ms: list[float] = []
    statuses: dict[str, int] = {}
    for _ in range(args.runs):
        with SimulatedCluster(scenario) as cluster:
            api = kubernetes.config.new_client_from_config_dict(yaml.safe_load(cluster.kubeconfig))
            for _ in range(20):
                t = time.perf_counter()
                orchestrator.test_connection(api, timeout_s=5)
                latency_ms.append((time.perf_counter() - t) * 1000)
            before = len(cluster.requests)
            hooks = TimingHooks()
            started = time.perf_counter()
            outcome = orchestrator.run_validation(
                api,
                orchestrator.RunSpec(
                    run_id=orchestrator.generate_run_id(),
                    recipe=recipe,
                    validator_catalog=catalog,
                    aicr_version="v0.19.0",
                    catalog_files=tree,
                ),
                hooks,
            )
            ended = time.perf_counter()
            requests = len(cluster.requests) - before
        statuses[outcome.status] = statuses.get(outcome.status, 0) + 1
        if outcome.error:
            print(f"run ended {outcome.status}: {outcome.error}")
        checks = list(hooks.durations.values())
        overheads += [d - hooks.waited[name] for name, d in hooks.durations.items()]
        waits += list(hooks.waited.values())
        cpu += list(hooks.cpu.values())
        run_s.append(ended - started)
        snapshot_s.append(hooks.snapshot_at - started)
        in_checks = sum(checks)
        setup_s.append((ended - started) - (hooks.snapshot_at - started) - in_checks)
        per_check_requests.append(requests / max(1, len(checks)))

    n = len(overheads)
    if not n:
        print("no check ran; nothing to report")
        return
    print(f"scenario healthy-h100-eks, time_scale {scenario.time_scale:g}, load {os.getloadavg()}")
    print(f"runs {args.runs} ({statuses}), checks measured {n}")
    print(
        f"simulator latency per request (GET /version): p50 {statistics.median(latency_ms):.2f}"
        f" ms, p95 {pct(latency_ms, 0.95):.2f} ms"
    )
    ms = [o * 1000 for o in overheads]
    print(
        f"orchestration overhead per check: p50 {statistics.median(ms):.1f} ms, "
        f"p95 {pct(ms, 0.95):.1f} ms, max {max(ms):.1f} ms (target <= 50 ms)"
    )
    print(
        f"  of which the orchestrator thread's own CPU: p50 {statistics.median(cpu) * 1000:.1f} ms,"
        f" p95 {pct(cpu, 0.95) * 1000:.1f} ms (the rest is API round trips to the simulator)"
    )
    print(
        f"waiting for the (simulated) cluster per check: p50 {statistics.median(waits) * 1000:.1f}"
        f" ms, p95 {pct(waits, 0.95) * 1000:.1f} ms"
    )
    print(
        f"API requests per check (incl. snapshot/setup share): "
        f"{statistics.mean(per_check_requests):.1f}"
    )
    print(
        f"per run: total {statistics.median(run_s):.2f} s, snapshot agent "
        f"{statistics.median(snapshot_s) * 1000:.0f} ms, setup + CTRF + cleanup "
        f"{statistics.median(setup_s) * 1000:.0f} ms (medians)"
    )


if __name__ == "__main__":
    main()
