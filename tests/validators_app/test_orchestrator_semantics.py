"""AICR's failure semantics for a check's API trouble, a cancel that wins over retries, and
answers whose ``Content-Encoding`` would decompress past the answer cap.

AICR (pkg/validator/validator.go ``runPhase``, pkg/validator/job/result.go ``HandleTimeout``):
a wait that fails is a check result (``other``, ``validation failed: <cause>``), the Job is
deleted and the next check runs; only preparing the cluster (and the snapshot) fails the run.
The faults are the simulator's ``ApiFaults`` limited to one Job's GETs (its read and watch),
so the apply, the delete and every other check are served as usual.
"""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from aicr_site.lib import outbound
from tests import hostile_corpus
from tests.k8s_sim import RESOURCES_BY_PLURAL, ApiFaults, SimulatedCluster
from tests.validators_app.kubeconfigs import kubeconfig
from tests.validators_app.test_orchestrator_sim import (
    FAST,
    NS,
    RUN_ID,
    Hooks,
    _api,
    _by_name,
    _leftovers,
    _run,
    _spec,
    steady,
)
from validators_app import kubeconfig as kubeconfig_module
from validators_app.orchestrator import RetryPolicy, agent, run_validation
from validators_app.orchestrator.kube import ApiUnavailable, Kube
from validators_app.orchestrator.plan import job_name

DEPLOYMENT = ("operator-health", "expected-resources", "gpu-operator-version", "check-nvidia-smi")


def _failing_gets(check: str) -> ApiFaults:
    """Every GET of ``check``'s Job (its read after the apply) answers 503; nothing else does."""
    return ApiFaults(
        status=503,
        probability=1.0,
        path_contains=f"/jobs/{job_name(RUN_ID, check)}",
        methods=("GET",),
    )


def test_an_api_failing_while_a_check_waits_makes_that_check_other_and_the_run_goes_on() -> None:
    # Its container runs 3 s of wall time (300 simulated s at 0.01; its deadline is 8m = 4.8 s):
    # still running when the retries give up, so HandleTimeout has no exit code to report.
    scenario = replace(
        steady("healthy-h100-eks"),
        time_scale=0.01,
        check_seconds={"expected-resources": 300.0},
        api_faults=_failing_gets("expected-resources"),
    )
    outcome, cluster = _run(scenario, phases=("deployment",))
    assert outcome.status == "failed", outcome.error  # a run with an ``other`` check fails
    assert outcome.error == ""
    assert [(c.name, c.status) for c in outcome.checks] == [
        ("operator-health", "passed"),
        ("expected-resources", "other"),
        ("gpu-operator-version", "passed"),
        ("check-nvidia-smi", "passed"),
    ]
    failed = _by_name(outcome)["expected-resources"]
    job = job_name(RUN_ID, "expected-resources")
    # HandleTimeout found the pod, its container had not terminated: AICR's wait-failure text.
    assert failed.exit_code == -1
    assert failed.message.startswith(
        f"validation failed: read job {job}: Kubernetes API still failing after 4 attempt(s): "
        "HTTP 503"
    )
    # The CTRF carries it like any other result.
    tests = json.loads(outcome.merged_report or b"{}")["results"]["tests"]
    assert [t["status"] for t in tests] == ["passed", "other", "passed", "passed"]
    # The failing Job was deleted (best effort: its DELETE is served) and nothing is left.
    assert any(m == "DELETE" and p.endswith(f"/jobs/{job}") for m, p in cluster.requests)
    assert job not in [o["metadata"]["name"] for o in cluster.objects("Job", NS)]
    assert [n for n in _leftovers(cluster, RUN_ID) if not n.startswith("Pod/")] == []
    assert sum(1 for r in cluster.request_log if r.status == 503) == 4


def test_a_pod_list_that_keeps_failing_is_other_for_each_check_as_aicr_reports_it() -> None:
    scenario = replace(
        steady("healthy-h100-eks"),
        api_faults=ApiFaults(status=503, probability=1.0, path_contains=f"/namespaces/{NS}/pods"),
    )
    outcome, cluster = _run(scenario, phases=("deployment",))
    assert outcome.status == "failed"
    assert [c.status for c in outcome.checks] == ["other"] * 4
    for check in outcome.checks:
        assert check.message.startswith(
            f"pod not found for Job {check.job_name}: list pods of {check.job_name}: "
            "Kubernetes API still failing after 4 attempt(s): HTTP 503"
        )
    assert outcome.merged_report is not None
    assert [n for n in _leftovers(cluster, RUN_ID) if not n.startswith("Pod/")] == []


def test_the_snapshot_agent_waiting_on_a_failing_api_still_ends_the_run_in_error() -> None:
    scenario = replace(
        steady("healthy-h100-eks"),
        api_faults=ApiFaults(
            status=503, probability=1.0, path_contains="/jobs/aicr-validate", methods=("GET",)
        ),
    )
    outcome, cluster = _run(scenario, phases=("deployment",))
    assert outcome.status == "error"
    assert outcome.error.startswith(
        "read job aicr-validate: Kubernetes API still failing after 4 attempt(s): HTTP 503"
    )
    assert outcome.checks == ()
    assert cluster.objects("Job", NS) == []


class CancelAfterFailures(Hooks):
    """Asks for a cancel once the cluster has refused ``after`` requests; counts the polls."""

    def __init__(self, cluster: SimulatedCluster, after: int) -> None:
        super().__init__()
        self.cluster, self.after = cluster, after
        self.refused_at_cancel: int | None = None

    def cancel_requested(self) -> bool:
        refused = sum(1 for r in self.cluster.request_log if r.status == 503)
        if self.refused_at_cancel is None and refused >= self.after:
            self.refused_at_cancel = refused
        return self.refused_at_cancel is not None


def test_a_cancel_wins_over_the_retries_of_a_failing_api() -> None:
    # Slow backoff (1 s, 2 s, 4 s … over 8 attempts): without the poll between attempts the
    # cancel would be seen only after the last one.
    slow = RetryPolicy(attempts=8, base_delay_s=1.0, max_delay_s=4.0, total_s=60, poll_s=0.05)
    scenario = replace(steady("healthy-h100-eks"), api_faults=_failing_gets("expected-resources"))
    with SimulatedCluster(scenario) as cluster:
        hooks = CancelAfterFailures(cluster, after=2)
        outcome = run_validation(_api(cluster), _spec(phases=("deployment",)), hooks, retry=slow)
    assert outcome.status == "cancelled"
    assert hooks.refused_at_cancel == 2
    refused = sum(1 for r in cluster.request_log if r.status == 503)
    assert refused == 2  # no attempt after the cancel was seen
    # The Job in flight and the run's objects went with it.
    job = job_name(RUN_ID, "expected-resources")
    assert job not in [o["metadata"]["name"] for o in cluster.objects("Job", NS)]
    assert [n for n in _leftovers(cluster, RUN_ID) if not n.startswith("Pod/")] == []
    assert [c.name for c in outcome.checks] == ["operator-health"]


def test_the_retry_loop_heartbeats_and_polls_between_attempts() -> None:
    scenario = replace(steady("healthy-h100-eks"), api_faults=_failing_gets("operator-health"))
    with SimulatedCluster(scenario) as cluster:
        calls: list[str] = []
        kube = Kube(_api(cluster), FAST, between_attempts=lambda: calls.append("poll"))
        path = f"/apis/batch/v1/namespaces/{NS}/jobs/{job_name(RUN_ID, 'operator-health')}"
        with pytest.raises(ApiUnavailable, match="still failing after 4 attempt"):
            kube.get("read job", path)
    assert len(calls) >= 3  # before each of the 3 retries, and during their sleeps


# --- Content-Encoding and other hostile answers ----------------------------------------------

CAP = 1024 * 1024


@contextmanager
def hostile_server() -> Iterator[str]:
    """Answers ``/compressed/<member>`` with that ``hostile_corpus.COMPRESSED`` member (its
    ``Content-Encoding``, unasked), ``/json/<member>`` with a ``hostile_corpus.JSON`` member,
    ``/small`` with a small gzip JSON answer."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            kind, _, member = self.path.split("?")[0].strip("/").partition("/")
            member = member.split("/")[0]
            if kind == "compressed":
                encoding, body = hostile_corpus.COMPRESSED[member]
            elif kind in ("json", "json-error"):
                encoding, body = "", hostile_corpus.JSON[member]
            else:
                encoding, body = "gzip", gzip.compress(b'{"kind": "ConfigMap"}')
            self.send_response(500 if kind == "json-error" else 200)
            self.send_header("Content-Type", "application/json")
            if encoding:
                self.send_header("Content-Encoding", encoding)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def capped_kube() -> Iterator[Kube]:
    """A Kube over the site's pinned client, each answer capped at ``CAP`` bytes."""
    with (
        hostile_server() as url,
        kubeconfig_module.api_client(
            kubeconfig(server=url, user={"token": "t"}),
            environment="simulated",
            limits=outbound.Limits(max_answer_bytes=CAP, deadline_s=10),
        ) as api,
    ):
        yield Kube(api, FAST)


def test_a_gzip_bomb_answer_is_refused_by_the_decoded_cap(capped_kube: Kube) -> None:
    bomb = hostile_corpus.COMPRESSED["gzip-bomb"][1]
    assert len(bomb) < CAP  # the wire cap alone lets it through
    assert capped_kube.max_answer_bytes == CAP
    with pytest.raises(ApiUnavailable) as refused:
        capped_kube.get("read ConfigMap", "/compressed/gzip-bomb")
    assert str(refused.value) == (
        f"read ConfigMap: the gzip answer decompresses to more than the limit of {CAP} bytes"
    )
    # A pod log (kept by its tail otherwise) is refused the same way, by name.
    with pytest.raises(ApiUnavailable, match="the gzip answer decompresses to more than"):
        capped_kube.call("read validator log", "GET", "/compressed/gzip-bomb", raw=True)
    # A small compressed answer is decoded as usual.
    assert capped_kube.get("read ConfigMap", "/small") == {"kind": "ConfigMap"}


@pytest.mark.parametrize("member", sorted(hostile_corpus.COMPRESSED))
def test_every_hostile_compressed_answer_is_refused_by_name(capped_kube: Kube, member: str) -> None:
    encoding = hostile_corpus.COMPRESSED[member][0]
    for raw in (False, True):  # a JSON answer, and a log's
        with pytest.raises(ApiUnavailable) as refused:
            capped_kube.call("read it", "GET", f"/compressed/{member}", raw=raw)
        reason = str(refused.value)
        assert reason.startswith(f"read it: the {encoding} answer") or reason == (
            f"read it: the answer has Content-Encoding {encoding!r}, which is not decoded here"
        ), reason


#: What a JSON corpus member answered by a cluster becomes: refused by name, or (a document
#: Python's JSON reads without harm) parsed.
JSON_ANSWERS = {
    "big-integer": "the answer is not usable JSON (ValueError)",
    "big-float": None,
    "deep-array-nesting": "the answer is not usable JSON (RecursionError)",
    "deep-object-nesting": "the answer is not usable JSON (RecursionError)",
    "unclosed-nesting": "the answer is not usable JSON (RecursionError)",
    "nan": None,
    "nul": None,
    "lone-surrogate": None,
    "not-utf8": "the answer is not usable JSON (UnicodeDecodeError)",
    "binary": "the answer is not usable JSON (JSONDecodeError)",
    "huge-string": f"the answer is over the limit of {CAP} bytes",
}


def test_the_json_answer_table_covers_the_corpus() -> None:
    assert set(JSON_ANSWERS) == set(hostile_corpus.JSON)


@pytest.mark.parametrize("member", sorted(hostile_corpus.JSON))
def test_every_hostile_json_answer_is_parsed_or_refused_by_name(
    capped_kube: Kube, member: str
) -> None:
    reason = JSON_ANSWERS[member]
    if reason is None:
        assert isinstance(capped_kube.get("read it", f"/json/{member}"), dict)
        return
    with pytest.raises(ApiUnavailable) as refused:
        capped_kube.get("read it", f"/json/{member}")
    assert str(refused.value) == f"read it: {reason}"


@pytest.mark.parametrize("member", sorted(hostile_corpus.JSON))
def test_every_hostile_json_error_answer_is_retried_then_refused_by_name(
    capped_kube: Kube, member: str
) -> None:
    with pytest.raises(ApiUnavailable) as refused:
        capped_kube.get("read it", f"/json-error/{member}")
    reason = str(refused.value)
    if member == "huge-string":  # past the wire cap: refused at once, not retried
        assert reason == f"read it: the answer is over the limit of {CAP} bytes"
        return
    assert reason.startswith("read it: Kubernetes API still failing after 4 attempt(s): HTTP 500")
    assert len(reason) < 800  # the body is quoted by its start at most


def test_a_cancel_is_seen_while_an_old_agent_job_is_still_being_deleted() -> None:
    # An earlier agent Job held by a finalizer (a controller's, not removed): its deletion does
    # not finish, so the run polls for up to 30 s before it can start its own agent; a cancel
    # must not wait that out.
    with SimulatedCluster(steady("healthy-h100-eks")) as cluster:
        cluster.store.create(RESOURCES_BY_PLURAL["namespaces"], "", {"metadata": {"name": NS}})
        held = agent.job(NS, "registry.invalid/aicr:old", {})
        held["metadata"]["finalizers"] = ["example.com/hold"]
        cluster.store.create(RESOURCES_BY_PLURAL["jobs"], NS, held)

        def agent_reads() -> int:
            path = f"/jobs/{agent.AGENT_JOB}"
            return sum(1 for m, p in cluster.requests if m == "GET" and p.endswith(path))

        class CancelWhileAwaiting(Hooks):
            def cancel_requested(self) -> bool:
                return agent_reads() >= 3

        outcome = run_validation(
            _api(cluster), _spec(phases=("deployment",)), CancelWhileAwaiting(), retry=FAST
        )
        left = cluster.objects("Job", NS)
    assert outcome.status == "cancelled"
    assert agent_reads() == 3  # polled until the cancel, not for 30 s
    created = [p for m, p in cluster.requests if m == "POST" and p.endswith(f"{NS}/jobs")]
    assert created == []  # no new agent was started
    # The held Job is still there, marked for deletion: finalizers are honoured.
    assert [j["metadata"].get("deletionTimestamp") is not None for j in left] == [True]
