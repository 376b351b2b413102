"""What recording the images that ran costs: the one extra read of the agent pod per run, and
parsing ``imageID``.

Per run (healthy scenario, deployment phase, against the simulated cluster): the wall time of
the agent pod read (``_Run._agent_ran``: one LIST of the agent Job's pods, before the agent's
cleanup), the API requests it adds, and the run's total requests for scale. Then
``images.repo_digest`` over a mix of runtime forms, per call. No Django, no database; asserts
nothing. Run: ``.venv/bin/python bench/image_digests.py [--runs 5]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import kubernetes
import yaml

from tests.k8s_sim import SCENARIOS, SimulatedCluster
from tests.shared_data import EVIDENCE_EXAMPLE_BUNDLE, VALIDATOR_CATALOG
from validators_app import orchestrator
from validators_app.orchestrator import run as run_module
from validators_app.orchestrator.images import repo_digest

AGENT_READ_S: list[float] = []
_agent_ran = run_module._Run._agent_ran


def _timed_agent_ran(self: Any, image: str) -> Any:
    started = time.perf_counter()
    try:
        return _agent_ran(self, image)
    finally:
        AGENT_READ_S.append(time.perf_counter() - started)


class Hooks:
    def snapshot_taken(self, snapshot_yaml: str, agent_image: str, agent_digest: str) -> None:
        self.agent = (agent_image, agent_digest)

    def phase_started(self, phase: str) -> None: ...
    def check_started(self, phase: str, name: str, job_name: str) -> None: ...
    def check_finished(self, outcome: orchestrator.CheckOutcome) -> None: ...
    def heartbeat(self) -> None: ...

    def cancel_requested(self) -> bool:
        return False


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    run_module._Run._agent_ran = _timed_agent_ran  # type: ignore[method-assign]
    recipe = yaml.safe_load((EVIDENCE_EXAMPLE_BUNDLE / "recipe.yaml").read_text())
    catalog = yaml.safe_load(VALIDATOR_CATALOG.read_text())
    added: list[int] = []
    totals: list[int] = []
    recorded = 0
    for _ in range(args.runs):
        with SimulatedCluster(SCENARIOS["healthy-h100-eks"]) as cluster:
            api = kubernetes.config.new_client_from_config_dict(yaml.safe_load(cluster.kubeconfig))
            hooks = Hooks()
            outcome = orchestrator.run_validation(
                api,
                orchestrator.RunSpec(
                    run_id=orchestrator.generate_run_id(),
                    recipe=recipe,
                    validator_catalog=catalog,
                    phases=("deployment",),
                    aicr_version="v0.19.0",
                ),
                hooks,
            )
            log = list(cluster.request_log)
        agent_lists = [
            r
            for r in log
            if r.method == "GET"
            and r.path.endswith("/pods")
            and "aicr-validate" in str(r.query.get("labelSelector", ""))
        ]
        added.append(len(agent_lists))
        totals.append(len(log))
        recorded += int(bool(hooks.agent[1])) + sum(bool(c.image_digest) for c in outcome.checks)
    ms = sorted(s * 1000 for s in AGENT_READ_S)
    print(f"runs {args.runs} (deployment phase, 4 checks each), load {os.getloadavg()}")
    print(
        f"agent pod read: p50 {statistics.median(ms):.2f} ms, max {ms[-1]:.2f} ms; "
        f"{statistics.mean(added):.1f} added request(s) per run of "
        f"{statistics.mean(totals):.0f} requests in all"
    )
    print(f"digests recorded: {recorded} of {args.runs * 5} containers (agent + 4 checks per run)")

    hexes = "0123456789abcdef" * 4
    forms = [
        f"ghcr.io/nvidia/aicr-validators/deployment@sha256:{hexes}",
        f"docker-pullable://ghcr.io/nvidia/aicr-validators/deployment@sha256:{hexes}",
        f"sha256:{hexes}",
        "",
    ]
    n = 200_000
    started = time.perf_counter()
    for i in range(n):
        repo_digest(forms[i % 4])
    per_call_us = (time.perf_counter() - started) / n * 1e6
    print(f"repo_digest: {per_call_us:.2f} us per imageID ({n} calls over 4 runtime forms)")


if __name__ == "__main__":
    main()
