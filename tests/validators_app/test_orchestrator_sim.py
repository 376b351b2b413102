"""The orchestrator against the simulated cluster (tests/k8s_sim): each scenario gives the status
and CTRF AICR's rules predict; API faults, cancel, resume, hostile logs."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import kubernetes
import pytest
import yaml

from evidence_app.attestation import redact_ctrf
from evidence_app.verification.ctrf import parse_ctrf
from recipes_app.resolver import read_tree
from tests.k8s_sim import SCENARIOS, ApiFaults, Scenario, SimulatedCluster
from tests.shared_data import EVIDENCE_EXAMPLE_BUNDLE, RECIPES_TREE, VALIDATOR_CATALOG
from validators_app import orchestrator
from validators_app.orchestrator import (
    CheckOutcome,
    RetryPolicy,
    RunOutcome,
    RunSpec,
    job_name,
    merge_reports,
    run_validation,
    test_connection,
    to_bytes,
)
from validators_app.orchestrator.connection import NOT_REACHABLE

RECIPE = yaml.safe_load((EVIDENCE_EXAMPLE_BUNDLE / "recipe.yaml").read_text())
CATALOG = yaml.safe_load(VALIDATOR_CATALOG.read_text())
# The catalog the example recipe was resolved from: the values files its policy is read from.
TREE = read_tree(RECIPES_TREE)
RUN_ID = "20261201-101500-0123456789abcdef"
# Few, quick retries; generous timeouts so a loaded CI machine is not mistaken for an outage.
FAST = RetryPolicy(
    attempts=4, base_delay_s=0.02, max_delay_s=0.2, total_s=30, request_timeout=(10, 30)
)
NS = "aicr-validation"
DEPLOYMENT = ("operator-health", "expected-resources", "gpu-operator-version", "check-nvidia-smi")
CONFORMANCE = (
    "dra-support", "gang-scheduling", "accelerator-metrics", "ai-service-metrics",
    "pod-autoscaling",
    "cluster-autoscaling", "robust-controller", "secure-accelerator-access", "gpu-operator-health",
    "platform-health",
)  # fmt: skip


class ClaimLost(Exception):
    """What the Celery side raises from a hook when another worker took the run over."""


class Hooks:
    def __init__(self, *, cancel_at: str | None = None, lose_claim_at: str | None = None) -> None:
        self.events: list[tuple[Any, ...]] = []
        self.finished: list[CheckOutcome] = []
        self.snapshot: str | None = None
        self.agent: tuple[str, str] = ("", "")
        self.current = ""
        self.cancel_at = cancel_at
        self.lose_claim_at = lose_claim_at
        self.heartbeats = 0

    def snapshot_taken(self, snapshot_yaml: str, agent_image: str, agent_digest: str) -> None:
        self.snapshot = snapshot_yaml
        self.agent = (agent_image, agent_digest)
        self.events.append(("snapshot",))

    def phase_started(self, phase: str) -> None:
        self.events.append(("phase", phase))

    def check_started(self, phase: str, name: str, job: str) -> None:
        self.current = name
        self.events.append(("start", phase, name, job))

    def check_finished(self, outcome: CheckOutcome) -> None:
        self.finished.append(outcome)
        self.events.append(("done", outcome.name, outcome.status))

    def heartbeat(self) -> None:
        self.heartbeats += 1
        if self.lose_claim_at and self.current == self.lose_claim_at:
            raise ClaimLost(self.current)

    def cancel_requested(self) -> bool:
        return self.cancel_at is not None and self.current == self.cancel_at


def _api(cluster: SimulatedCluster, token: str | None = None) -> kubernetes.client.ApiClient:
    config = yaml.safe_load(cluster.kubeconfig)
    if token is not None:
        config["users"][0]["user"]["token"] = token
    return kubernetes.config.new_client_from_config_dict(config)


def _spec(run_id: str = RUN_ID, **over: Any) -> RunSpec:
    fields: dict[str, Any] = {"catalog_files": TREE, **over}
    return RunSpec(
        run_id=run_id, recipe=RECIPE, validator_catalog=CATALOG, aicr_version="v0.19.0", **fields
    )


DEADLINE_SCENARIOS = ("job-deadline-exceeded", "image-never-pulled")


def steady(name: str) -> Scenario:
    """The scenario with the checks' simulated run time cut to 5 s each (the 420 s NCCL run
    would otherwise be 0.42 s of wall time per test); deadlines are unaffected."""
    return replace(SCENARIOS[name], check_seconds={})


def _run(
    scenario: Scenario | str, hooks: Hooks | None = None, **over: Any
) -> tuple[RunOutcome, SimulatedCluster]:
    if isinstance(scenario, str) and scenario not in DEADLINE_SCENARIOS:
        scenario = steady(scenario)
    with SimulatedCluster(scenario) as cluster:
        outcome = run_validation(_api(cluster), _spec(**over), hooks or Hooks(), retry=FAST)
    return outcome, cluster


def _by_name(outcome: RunOutcome) -> dict[str, CheckOutcome]:
    return {c.name: c for c in outcome.checks}


def _leftovers(cluster: SimulatedCluster, run_id: str) -> list[str]:
    names = [f"Job/{o['metadata']['name']}" for o in cluster.objects("Job", NS)]
    names += [f"Pod/{o['metadata']['name']}" for o in cluster.objects("Pod", NS)]
    names += [
        f"ConfigMap/{o['metadata']['name']}"
        for o in cluster.objects("ConfigMap", NS)
        if run_id in o["metadata"]["name"]
    ]
    names += [
        f"ServiceAccount/{o['metadata']['name']}"
        for o in cluster.objects("ServiceAccount", NS)
        if run_id in o["metadata"]["name"]
    ]
    names += [
        f"ClusterRoleBinding/{o['metadata']['name']}"
        for o in cluster.objects("ClusterRoleBinding")
        if run_id in o["metadata"]["name"]
    ]
    return names


def test_healthy_cluster_passes_with_aicr_shaped_ctrf() -> None:
    hooks = Hooks()
    outcome, cluster = _run("healthy-h100-eks", hooks)
    assert outcome.status == "passed", [(c.name, c.status, c.message) for c in outcome.checks]
    assert outcome.error == ""
    assert [c.name for c in outcome.checks] == [*DEPLOYMENT, *CONFORMANCE, "nccl-all-reduce-bw"]
    assert [e[1] for e in hooks.events if e[0] == "phase"] == [
        "deployment",
        "conformance",
        "performance",
    ]
    assert all(c.job_name == job_name(RUN_ID, c.name) for c in outcome.checks)
    assert hooks.snapshot == outcome.snapshot_yaml
    assert "kind: Snapshot" in (outcome.snapshot_yaml or "")
    # Per-phase bytes: Go JSON that evidence_app's parser reads, merged = MergeReports of them.
    assert set(outcome.phase_reports) == {"deployment", "conformance", "performance"}
    for phase, data in outcome.phase_reports.items():
        report = parse_ctrf(data)
        assert {t.phase for t in report.tests} == {phase}
        assert data.endswith(b"}\n")
    merged = json.loads(outcome.merged_report or b"")
    assert merged["results"]["summary"]["tests"] == 15
    assert merged["results"]["summary"]["passed"] == 15
    assert (
        to_bytes(
            merge_reports(
                "v0.19.0",
                [
                    json.loads(outcome.phase_reports[p])
                    for p in ("deployment", "conformance", "performance")
                ],
            )
        )
        == outcome.merged_report
    )
    nccl = _by_name(outcome)["nccl-all-reduce-bw"]
    assert any("GB/s" in line for line in nccl.stdout)
    assert _leftovers(cluster, RUN_ID) == []
    # The agent's ConfigMap and the namespace stay, as in AICR.
    assert [
        o["metadata"]["name"]
        for o in cluster.objects("ConfigMap", NS)
        if o["metadata"]["name"] == "aicr-snapshot"
    ]


@pytest.mark.parametrize(
    ("scenario", "phases", "check", "status", "message"),
    [
        (
            "gpu-operator-missing",
            ("deployment",),
            "operator-health",
            "failed",
            "[NOT_FOUND] no gpu-operator pods found",
        ),
        (
            "gpu-operator-too-old",
            ("deployment",),
            "gpu-operator-version",
            "failed",
            "GPU Operator version v23.9.2 does not satisfy",
        ),
        (
            "no-gpu-nodes",
            ("deployment",),
            "check-nvidia-smi",
            "failed",
            "[NOT_FOUND] recipe declares gpu-operator but the cluster has no GPU nodes",
        ),
        (
            "job-deadline-exceeded",
            ("deployment",),
            "expected-resources",
            "failed",
            "validator Job did not complete within its 8m0s deadline; no pod remains for it",
        ),
        (
            "image-never-pulled",
            ("deployment",),
            "operator-health",
            "failed",
            "validator Job did not complete within its 2m0s deadline",
        ),
        ("oom-killed", ("deployment",), "expected-resources", "other", "Container OOMKilled"),
        ("dra-absent", ("conformance",), "dra-support", "failed", ""),
    ],
)
def test_failure_scenarios_follow_aicr_rules(
    scenario: str, phases: tuple[str, ...], check: str, status: str, message: str
) -> None:
    outcome, cluster = _run(scenario, phases=phases)
    got = _by_name(outcome)[check]
    assert (got.status, outcome.status) == (status, "failed")
    assert message in got.message
    assert got.exit_code == {"failed": 1, "other": 137 if "OOM" in message else -1}[status]
    report = json.loads(outcome.merged_report or b"")
    test = next(t for t in report["results"]["tests"] if t["name"] == check)
    assert test["status"] == status
    assert test["message"] == got.message
    assert _leftovers(cluster, RUN_ID) == []


def test_deadline_pod_still_listed_is_other_with_the_waiting_reason() -> None:
    scenario = replace(SCENARIOS["image-never-pulled"], keep_pod_on_deadline=True)
    outcome, _ = _run(scenario, phases=("deployment",))
    first = outcome.checks[0]
    assert first.status == "other"
    assert first.exit_code == -1
    assert first.message.startswith(("ImagePullBackOff: ", "ErrImagePull: "))
    assert first.stdout == ()


@pytest.mark.parametrize(
    ("scenario", "message"),
    [
        (
            "readiness-old-kernel",
            "readiness check failed: OS.sysctl./proc/sys/kernel/osrelease expected >= 6.8, "
            "got 5.15.0-1051-aws",
        ),
        (
            "readiness-old-kubernetes",
            "readiness check failed: K8s.server.version expected >= 1.32.4, "
            "got v1.30.14-eks-931bdca",
        ),
    ],
)
def test_readiness_failure_is_an_error_without_ctrf_or_jobs(scenario: str, message: str) -> None:
    outcome, cluster = _run(scenario)
    assert (outcome.status, outcome.error) == ("error", message)
    assert outcome.merged_report is None
    assert outcome.phase_reports == {}
    assert outcome.checks == ()
    validator_jobs = [
        p for m, p in cluster.requests if "/jobs/aicr-" in p and not p.endswith("/aicr-validate")
    ]
    assert validator_jobs == []


def test_preflight_refuses_an_undeclared_catalog_check() -> None:
    recipe = {
        **RECIPE,
        "validation": {"deployment": {"checks": ["operator-health", "no-such-check"]}},
    }
    with SimulatedCluster("healthy-h100-eks") as cluster:
        outcome = run_validation(
            _api(cluster), replace(_spec(), recipe=recipe), Hooks(), retry=FAST
        )
    assert outcome.status == "error"
    assert "'no-such-check' is not found in the validator catalog" in outcome.error
    assert outcome.merged_report is None


def test_api_answering_500s_ends_as_error_quickly() -> None:
    started = time.monotonic()
    outcome, cluster = _run("api-500s")
    assert outcome.status == "error"
    assert "HTTP 500" in outcome.error
    assert "still failing after 4 attempt(s)" in outcome.error
    assert time.monotonic() - started < 30  # bounded: no hang
    assert len(cluster.requests) >= 4  # it did retry


def test_transient_api_errors_are_retried_transparently() -> None:
    scenario = replace(
        steady("healthy-h100-eks"),
        api_faults=ApiFaults(status=503, first_n=3, path_contains="/jobs"),
    )
    outcome, cluster = _run(scenario, phases=("deployment",))
    assert [c.status for c in outcome.checks] == ["passed"] * 4
    assert sum(1 for r in cluster.request_log if r.status == 503) == 3
    scenario = replace(
        steady("api-429"), api_faults=ApiFaults(status=429, first_n=3, retry_after_s=0)
    )
    outcome, _ = _run(scenario, phases=("deployment",))
    assert outcome.status == "passed"


def test_unreachable_server_is_an_error_and_test_connection_says_so() -> None:
    outcome, _ = _run("unreachable")
    assert outcome.status == "error"
    assert "not reachable (connection refused, timed out" in outcome.error  # one class
    with SimulatedCluster("unreachable") as cluster:
        result = test_connection(_api(cluster), timeout_s=30)
    assert not result.ok
    assert result.detail == NOT_REACHABLE


def test_test_connection_reports_version_401_and_timeout() -> None:
    with SimulatedCluster("healthy-h100-eks") as cluster:
        assert test_connection(_api(cluster), timeout_s=30) == orchestrator.ConnectionResult(
            True, "v1.33.5-eks-113cf36", "connected; Kubernetes v1.33.5-eks-113cf36"
        )
        denied = test_connection(_api(cluster, token="wrong"), timeout_s=30)
    assert (denied.ok, denied.detail) == (
        False,
        "HTTP 401: credentials were refused (unauthorized)",
    )
    with socket.socket() as silent:  # accepts connections (backlog) but never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{silent.getsockname()[1]}"}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        }  # fmt: skip
        started = time.monotonic()
        result = test_connection(
            kubernetes.config.new_client_from_config_dict(config), timeout_s=0.5
        )
    assert not result.ok
    assert result.detail == NOT_REACHABLE  # as a refused or TLS failure says
    assert time.monotonic() - started < 20


def test_hostile_logs_stay_bounded_and_escaped() -> None:
    outcome, _ = _run("huge-logs", phases=("deployment",))
    health = _by_name(outcome)["operator-health"]
    assert len(health.stdout) == 1000
    assert all(
        len(line.encode()) <= 512 + len("... [truncated 9999999 chars]") for line in health.stdout
    )
    data = outcome.phase_reports["deployment"]
    assert b"<" not in data
    assert b">" not in data
    assert json.loads(data)["results"]["tests"][0]["name"] == "operator-health"
    # The bundle's copy (no stdout, no message) passes the site's own CTRF reader.
    assert parse_ctrf(redact_ctrf(data)).tests[0].name == "operator-health"
    assert all(isinstance(v, str) for v in health.extra.values())
    # Go's Unmarshal turns a lone surrogate escape into U+FFFD; Go's encoder writes NUL as
    # \u0000 (the line stays in the CTRF as AICR keeps it).
    assert health.extra["note"] == "<b>bold</b>\ufffd"
    assert "a NUL \x00 byte in the last lines" in health.stdout
    assert b"a NUL \\u0000 byte in the last lines" in data


def test_watches_that_drop_or_expire_still_finish() -> None:
    outcome, cluster = _run("watch-drops", phases=("deployment",))
    healthy, _ = _run("healthy-h100-eks", phases=("deployment",))
    assert [(c.name, c.status, c.message) for c in outcome.checks] == [
        (c.name, c.status, c.message) for c in healthy.checks
    ]
    relists = [
        r
        for r in cluster.request_log
        if r.path.endswith("/jobs") and "watch" not in r.query and "fieldSelector" in r.query
    ]
    assert relists  # a 410 made it re-list


def test_phases_run_in_the_users_order() -> None:
    outcome, _ = _run("healthy-h100-eks", phases=("performance", "deployment", "performance"))
    assert [c.phase for c in outcome.checks] == ["performance", *["deployment"] * 4]
    tests = json.loads(outcome.merged_report or b"")["results"]["tests"]
    assert [t["suite"][0] for t in tests] == ["performance", *["deployment"] * 4]


def test_cancel_deletes_the_job_in_flight_and_the_runs_objects() -> None:
    hooks = Hooks(cancel_at="expected-resources")
    outcome, cluster = _run("healthy-h100-eks", hooks, phases=("deployment",))
    assert outcome.status == "cancelled"
    assert outcome.merged_report is None
    assert [c.name for c in outcome.checks] == ["operator-health"]
    assert _leftovers(cluster, RUN_ID) == []
    deleted = [p for m, p in cluster.requests if m == "DELETE"]
    assert (
        f"/apis/batch/v1/namespaces/{NS}/jobs/{job_name(RUN_ID, 'expected-resources')}" in deleted
    )


def test_resume_adopts_the_job_in_flight_and_skips_finished_checks() -> None:
    run_id = "20261201-101500-00000000000000aa"
    scenario = replace(steady("healthy-h100-eks"), check_seconds={"gpu-operator-version": 60.0})
    in_flight = f"/apis/batch/v1/namespaces/{NS}/jobs/{job_name(run_id, 'gpu-operator-version')}"
    with SimulatedCluster(scenario) as cluster:
        first = Hooks(lose_claim_at="gpu-operator-version")
        with pytest.raises(ClaimLost):
            run_validation(_api(cluster), _spec(run_id, phases=("deployment",)), first, retry=FAST)
        # A hook's exception (the claim moved) leaves everything in place for the next worker.
        assert f"Job/{job_name(run_id, 'gpu-operator-version')}" in _leftovers(cluster, run_id)
        assert f"ClusterRoleBinding/aicr-validator-{run_id}" in _leftovers(cluster, run_id)
        requests_before = len(cluster.requests)
        second = Hooks()
        outcome = run_validation(
            _api(cluster),
            _spec(
                run_id,
                phases=("deployment",),
                snapshot_yaml=first.snapshot,
                completed=tuple(first.finished),
            ),
            second,
            retry=FAST,
        )
        later = cluster.requests[requests_before:]
    assert [c.name for c in first.finished] == ["operator-health", "expected-resources"]
    assert outcome.status == "passed"
    assert [c.name for c in outcome.checks] == list(DEPLOYMENT)
    assert [e[2] for e in second.events if e[0] == "start"] == [
        "gpu-operator-version",
        "check-nvidia-smi",
    ]
    assert ("PATCH", in_flight) not in later  # adopted, not applied again
    assert ("GET", in_flight) in later
    assert not [p for _, p in later if p.endswith("/jobs/aicr-validate")]  # no second snapshot
    assert second.snapshot is None
    assert _leftovers(cluster, run_id) == []


def test_invalid_run_id_and_phase_are_errors() -> None:
    with SimulatedCluster("healthy-h100-eks") as cluster:
        api = _api(cluster)
        bad_id = run_validation(api, _spec("run-1"), Hooks(), retry=FAST)
        bad_phase = run_validation(api, _spec(phases=("deploy",)), Hooks(), retry=FAST)
    assert bad_id.status == "error"
    assert "invalid run ID" in bad_id.error
    assert bad_phase.status == "error"
    assert "unknown phase 'deploy'" in bad_phase.error
    assert cluster.requests == []


def _hook_counts(run: Callable[[], RunOutcome], hooks: Hooks) -> int:
    run()
    return hooks.heartbeats


def test_it_heartbeats_while_waiting() -> None:
    hooks = Hooks()
    assert (
        _hook_counts(lambda: _run("healthy-h100-eks", hooks, phases=("deployment",))[0], hooks) >= 4
    )


def test_a_job_the_api_refuses_is_other_and_the_run_goes_on() -> None:
    refused = job_name(RUN_ID, "gpu-operator-version")
    scenario = replace(
        steady("healthy-h100-eks"),
        api_faults=ApiFaults(status=422, probability=1.0, path_contains=f"/jobs/{refused}"),
    )
    outcome, _ = _run(scenario, phases=("deployment",))
    got = _by_name(outcome)["gpu-operator-version"]
    assert (got.status, got.exit_code, got.duration_ms) == ("other", -1, 0)
    assert got.message.startswith(f"failed to deploy Job: apply job {refused}: HTTP 422")
    assert [c.status for c in outcome.checks] == ["passed", "passed", "other", "passed"]
    assert outcome.status == "failed"


def test_an_unreadable_log_is_only_a_warning() -> None:
    scenario = replace(
        steady("gpu-operator-missing"),
        api_faults=ApiFaults(status=500, probability=1.0, path_contains="/log"),
    )
    outcome, _ = _run(scenario, phases=("deployment",))
    health = _by_name(outcome)["operator-health"]
    assert (health.status, health.message) == ("failed", "[NOT_FOUND] no gpu-operator pods found")
    assert health.stdout == ()


def test_cancel_during_the_snapshot_cleans_the_agent_up() -> None:
    class CancelAtOnce(Hooks):
        def cancel_requested(self) -> bool:
            return True

    outcome, cluster = _run("healthy-h100-eks", CancelAtOnce())
    assert (outcome.status, outcome.snapshot_yaml, outcome.checks) == ("cancelled", None, ())
    assert cluster.objects("Job", NS) == []
    assert [
        o
        for o in cluster.objects("ClusterRoleBinding")
        if o["metadata"]["name"] == "aicr-node-reader"
    ] == []


def test_a_job_not_terminal_within_its_budget_is_other_with_aicrs_timeout_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from validators_app.orchestrator import run as run_module

    # AICR waits the catalog timeout + 30 s; shrink that budget to 0.3 s for operator-health
    # (2 m) so the wait gives up while the hanging container still runs (its 2 m deadline is
    # 1.2 s of wall time at time_scale 0.01).
    monkeypatch.setattr(run_module, "WAIT_BUFFER_S", 0.3 - 120)
    scenario = replace(
        steady("healthy-h100-eks"), hang_checks=("operator-health",), time_scale=0.01
    )
    outcome, cluster = _run(scenario, phases=("deployment",))
    health = _by_name(outcome)["operator-health"]
    assert (health.status, health.exit_code) == ("other", -1)
    assert health.message == "timeout: validator did not complete within 2m0s"
    assert health.stdout  # the logs so far are captured
    assert outcome.status == "failed"
    assert _leftovers(cluster, RUN_ID) == []


def test_https_runs_and_test_connection_verifies_the_ca() -> None:
    import base64

    with SimulatedCluster(steady("healthy-h100-eks"), tls=True) as cluster:
        good = test_connection(_api(cluster), timeout_s=30)
        run = run_validation(_api(cluster), _spec(phases=("deployment",)), Hooks(), retry=FAST)
        assert run.status == "passed"
        config = yaml.safe_load(cluster.kubeconfig)
        other_ca = SimulatedCluster("healthy-h100-eks", tls=True).certificate
        assert other_ca is not None
        config["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(
            other_ca.ca_pem
        ).decode()
        bad = test_connection(kubernetes.config.new_client_from_config_dict(config), timeout_s=30)
    assert good.ok
    assert cluster.url.startswith("https://127.0.0.1:")
    assert not bad.ok
    assert bad.detail == NOT_REACHABLE  # what a port answered is not shown


def test_leftover_agent_objects_are_updated_not_duplicated() -> None:
    from validators_app.orchestrator import agent
    from validators_app.orchestrator.kube import Kube

    with SimulatedCluster(steady("healthy-h100-eks")) as cluster:
        api = _api(cluster)
        kube = Kube(api, FAST)
        kube.create(
            "namespace", "/api/v1/namespaces", {"metadata": {"name": NS, "labels": {"team": "x"}}}
        )
        stale_role = {**agent.role(NS), "rules": []}
        kube.create("role", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/roles", stale_role)
        outcome = run_validation(api, _spec(phases=("deployment",)), Hooks(), retry=FAST)
        updates = [(r.method, r.path, r.status) for r in cluster.request_log if r.method == "PUT"]
        (namespace,) = [o for o in cluster.objects("Namespace") if o["metadata"]["name"] == NS]
    assert outcome.status == "passed"
    assert updates == [
        ("PUT", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/roles/aicr", 200)
    ]
    assert namespace["metadata"]["labels"]["team"] == "x"  # merged, not replaced
    assert namespace["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "aicr"
    assert namespace["metadata"]["labels"]["app.kubernetes.io/component"] == "validation"


def test_the_agent_is_pinned_to_a_gpu_node_when_one_exists() -> None:
    scenario = steady("healthy-h100-eks")
    system_first = replace(
        scenario, nodes=(scenario.nodes[2], scenario.nodes[0], scenario.nodes[1])
    )
    cancel = Hooks(cancel_at="operator-health")
    outcome, cluster = _run(system_first, cancel, phases=("deployment",))
    snapshot = yaml.safe_load(outcome.snapshot_yaml or "")
    assert snapshot["metadata"]["source-node"] == "ip-10-0-12-34.ec2.internal"  # not the first node
    (lookup,) = [r for r in cluster.request_log if r.path == "/api/v1/nodes"]
    assert lookup.query == {"labelSelector": "nvidia.com/gpu.present=true", "limit": "1"}


def test_a_failed_rbac_revocation_is_an_error_without_ctrf(monkeypatch: pytest.MonkeyPatch) -> None:
    from validators_app.orchestrator.kube import ApiUnavailable, Kube

    real_delete = Kube.delete

    def delete(self: Kube, what: str, path: str, *, foreground: bool = False) -> bool:
        if f"/clusterrolebindings/aicr-validator-{RUN_ID}" in path:
            raise ApiUnavailable(f"{what}: HTTP 403 Forbidden")  # e.g. the token lost its rights
        return real_delete(self, what, path, foreground=foreground)

    monkeypatch.setattr(Kube, "delete", delete)
    outcome, _ = _run("healthy-h100-eks", phases=("deployment",))
    assert outcome.status == "error"
    assert outcome.error == (
        "failed to revoke validator RBAC: revoke cluster role binding: HTTP 403 Forbidden"
    )
    assert (outcome.merged_report, dict(outcome.phase_reports)) == (None, {})
    assert len(outcome.checks) == 4


def test_an_unexpected_exception_still_revokes_the_runs_rbac(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from validators_app.orchestrator import run as run_module

    class TimeLimit(Exception):
        """Like Celery's SoftTimeLimitExceeded, raised inside the orchestrator's own code."""

    def expired(*args: object, **kwargs: object) -> None:
        raise TimeLimit

    monkeypatch.setattr(run_module._Run, "_extract", expired)
    with SimulatedCluster(steady("healthy-h100-eks")) as cluster:
        with pytest.raises(TimeLimit):
            run_validation(_api(cluster), _spec(phases=("deployment",)), Hooks(), retry=FAST)
        # The Job in flight (Foreground: it goes right after its pod), CRB, SA, ConfigMaps.
        deadline = time.monotonic() + 5
        while _leftovers(cluster, RUN_ID) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _leftovers(cluster, RUN_ID) == []
