"""Failure modes of a live cluster that the first scenarios left out (issue 7 follow-up): the
snapshot agent failing or outlasting its ``--timeout`` budget (AICR-VALIDATE.md §2), and a
validator pod evicted or lost with its node (§6.5, "eviction / node loss"). Each gives the run
status, check status, exit code and message AICR's orchestrator would."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from tests.k8s_sim import SCENARIOS, SimulatedCluster
from tests.validators_app.test_orchestrator_sim import (
    NS,
    RUN_ID,
    Hooks,
    _by_name,
    _leftovers,
    _run,
)
from validators_app.orchestrator import job_name

AGENT_OBJECTS = (
    ("Job", NS, "aicr-validate"),
    ("ServiceAccount", NS, "aicr"),
    ("Role", NS, "aicr"),
    ("RoleBinding", NS, "aicr"),
    ("ClusterRole", None, "aicr-node-reader"),
    ("ClusterRoleBinding", None, "aicr-node-reader"),
)


def _agent_leftovers(cluster: SimulatedCluster) -> list[str]:
    return [
        f"{kind}/{name}"
        for kind, namespace, name in AGENT_OBJECTS
        if any(o["metadata"]["name"] == name for o in cluster.objects(kind, namespace))
    ]


def test_a_failed_snapshot_agent_is_an_error_with_its_log_and_nothing_deployed() -> None:
    hooks = Hooks()
    outcome, cluster = _run("agent-fails", hooks)

    assert outcome.status == "error"
    first, _, log_tail = outcome.error.partition("\nagent log (last lines):\n")
    # AICR: "job failed", with the agent's logs dumped; here the Job's condition says why.
    assert first == (
        "snapshot agent Job aicr-validate failed (BackoffLimitExceeded): "
        "Job has reached the specified backoff limit"
    )
    assert 'configmaps \\"aicr-snapshot\\" is forbidden' in log_tail
    assert "level=ERROR" in log_tail
    assert (outcome.snapshot_yaml, outcome.merged_report, outcome.checks) == (None, None, ())
    assert hooks.snapshot is None
    assert not [e for e in hooks.events if e[0] in ("phase", "start")]
    assert _agent_leftovers(cluster) == []
    configmaps = [o["metadata"]["name"] for o in cluster.objects("ConfigMap", NS)]
    assert not [name for name in configmaps if name.startswith("aicr-snapshot")]
    # No validator Job was applied (they are PATCHed by name: /jobs/aicr-<check>-<hex>).
    job_paths = {p.rsplit("/jobs/", 1)[1] for _, p in cluster.requests if "/jobs/" in p}
    assert job_paths == {"aicr-validate"}


def test_a_snapshot_agent_past_its_timeout_is_an_error_naming_the_budget() -> None:
    hooks = Hooks()
    outcome, cluster = _run("agent-hangs", hooks, snapshot_timeout_s=1)

    assert outcome.status == "error"
    assert outcome.error == "snapshot agent Job aicr-validate did not complete within 1s"
    assert (outcome.snapshot_yaml, outcome.merged_report, outcome.checks) == (None, None, ())
    assert hooks.heartbeats > 0  # it kept the run alive while waiting
    assert _agent_leftovers(cluster) == []


@pytest.mark.parametrize(
    ("scenario", "exit_code", "message", "has_log"),
    [
        pytest.param(
            "pod-evicted",
            137,
            "The container could not be located when the pod was terminated",
            True,
            id="evicted-pod-still-listed",
        ),
        pytest.param(
            "node-lost",
            -1,
            f"Job {job_name(RUN_ID, 'expected-resources')} failed (BackoffLimitExceeded): "
            "Job has reached the specified backoff limit; pod not found: no pods match "
            f"batch.kubernetes.io/job-name={job_name(RUN_ID, 'expected-resources')}",
            False,
            id="node-lost-pod-deleted",
        ),
    ],
)
def test_a_disrupted_validator_is_other_and_the_run_goes_on(
    scenario: str, exit_code: int, message: str, has_log: bool
) -> None:
    outcome, cluster = _run(scenario, phases=("deployment",))

    assert outcome.status == "failed"
    checks = _by_name(outcome)
    got = checks["expected-resources"]
    assert (got.status, got.exit_code, got.message) == ("other", exit_code, message)
    # The killed container wrote half its log and no verdict line; a lost pod has no log.
    assert bool(got.stdout) is has_log
    assert not any(line.startswith("RESULT:") for line in got.stdout)
    # Eviction or node loss stops one check, not the phase: the later checks still ran.
    assert [c.name for c in outcome.checks][-2:] == ["gpu-operator-version", "check-nvidia-smi"]
    assert {c.status for n, c in checks.items() if n != "expected-resources"} == {"passed"}
    report = json.loads(outcome.merged_report or b"")
    test = next(t for t in report["results"]["tests"] if t["name"] == "expected-resources")
    assert (test["status"], test["message"]) == ("other", message)
    assert report["results"]["summary"]["other"] == 1
    assert ("stdout" in test) is has_log
    assert _leftovers(cluster, RUN_ID) == []


BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n" + "".join(
    f"{chr(99 + i)}: &{chr(99 + i)} [{', '.join([f'*{chr(98 + i)}'] * 9)}]\n" for i in range(7)
)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        pytest.param(BOMB + "measurements: []\n", "anchors are not allowed", id="yaml-bomb"),
        pytest.param("kind: Snapshot\x00\nmeasurements: []\n", "not valid YAML", id="nul"),
        pytest.param("kind: Snapshot\nmeasurements: [\n", "not valid YAML", id="broken-yaml"),
        pytest.param("- just\n- a list\n", "no measurements list", id="not-a-snapshot"),
    ],
)
def test_a_hostile_snapshot_is_refused_before_anything_stores_it(text: str, reason: str) -> None:
    hooks = Hooks()
    outcome, cluster = _run(replace(SCENARIOS["healthy-h100-eks"], snapshot_text=text), hooks)

    assert outcome.status == "error"
    assert outcome.error.startswith("snapshot "), outcome.error
    assert reason in outcome.error
    assert "\x00" not in outcome.error
    assert (outcome.snapshot_yaml, hooks.snapshot, outcome.checks) == (None, None, ())
    assert _agent_leftovers(cluster) == []
    assert _leftovers(cluster, RUN_ID) == []
