"""The scale-out deployment across hosts and through faults (tests/deploy/deployment.py).

The tests share one deployment and run in this order; each fault ends with the deployment
whole again (the killed host restarted). Figures (uploads per second with two web hosts and
with one, lost and duplicated counts) are printed: run with ``-s`` to see them."""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from aicr_site.lib.locks import _advisory_key
from tests.aicr_site.test_request_guards import ROUTE_PATHS
from tests.deploy.deployment import STALE_SECONDS, WORKER_HOSTS, Answer, pause, resume
from tests.deploy.hosts import wait_until
from tests.k8s_sim import SCENARIOS, SimulatedCluster
from tests.validators_app.runs_support import RECIPE
from validators_app.tasks import REAPER_LOCK

BUNDLES = 41
RUN_RECEIVED = "Task validators_app.tasks.run_execute["
REAPER_SKIPPED = "runs reaper: another pass holds the lock"
FINAL = ("passed", "failed", "error", "cancelled")
figures: dict[str, Any] = {}


def test_it_started_in_any_order_and_named_what_was_missing(deployment: Any) -> None:
    early = deployment.early_ready
    assert early.status == 503
    assert early.headers.get("Retry-After")
    assert set(early.json()["missing"]) >= {"database", "broker"}
    for name in WORKER_HOSTS:
        log = deployment.host(name).log_text("worker")
        assert "waiting for the database (attempt 1)" in log, log[-2000:]
    assert "waiting for the broker (attempt 1)" in deployment.host("beat").log_text("beat")


def test_every_page_answers_through_nginx(deployment: Any) -> None:
    answers = {path: deployment.request(path) for path in ROUTE_PATHS}
    errors = {
        p: (a.status, a.body[:200]) for p, a in answers.items() if a.status >= 500 or a.status == 0
    }
    assert errors == {}, deployment.logs("gunicorn")
    for path in ("/", "/recipes/", "/evidence/", "/runs/", "/qualifications/", "/api/v1/recipes/"):
        assert answers[path].status == 200, (path, answers[path].status)


def _evidence_count(deployment: Any) -> int:
    return int(deployment.sql("SELECT count(*) FROM evidence_app_evidence")[0][0])


def test_an_upload_and_exports_agree_on_both_web_hosts(deployment: Any) -> None:
    assert len(deployment.bundles) >= BUNDLES
    first = deployment.upload(0)
    assert first.status == 201, first.body[:500]
    again = deployment.upload(0)
    assert (again.status, again.json()["id"]) == (200, first.json()["id"])
    # Straight to each web host (not through nginx): the same record, the same bytes.
    path = f"/api/v1/evidence/{first.json()['id']}/"
    bodies = {
        name: deployment.host("client").call(
            _direct, deployment.host(name).address, path, deployment.hosts["proxy"].address
        )
        for name in ("web1", "web2")
    }
    assert bodies["web1"] == bodies["web2"] != b""
    maintainer = deployment.tokens["maintainer"]
    ndjson = deployment.request("/api/v1/export/evidence.ndjson", token=maintainer)
    assert ndjson.status == 200
    assert len(ndjson.body.splitlines()) == _evidence_count(deployment)
    audit = deployment.request("/api/v1/export/audit.tar.gz", token=maintainer, timeout=120)
    assert audit.status == 200, audit.body[:300]
    assert audit.body[:2] == b"\x1f\x8b"  # gzip: signed with the site key read from its file


def _direct(address: str, path: str, host_header: str, token: str = "") -> bytes:
    import urllib.request

    headers = {"Host": host_header} | ({"Authorization": f"Bearer {token}"} if token else {})
    request = urllib.request.Request(f"http://{address}:8000{path}", headers=headers)
    with urllib.request.urlopen(request, timeout=60) as response:
        return bytes(response.read())


def _register(deployment: Any, name: str, scenario: Any) -> tuple[SimulatedCluster, int]:
    sim_host = deployment.host("sim")
    sim = sim_host.call(lambda: SimulatedCluster(scenario, host=sim_host.address).start())
    answer = deployment.api_json(
        "/api/v1/clusters/",
        {"name": name, "kubeconfig": sim.kubeconfig, "environment": "simulated"},
        deployment.tokens["maintainer"],
    )
    assert answer.status == 201, answer.body[:500]
    return sim, int(answer.json()["id"])


def _start_run(deployment: Any, cluster: int) -> int:
    answer = deployment.api_json(
        "/api/v1/runs/",
        {"cluster": cluster, "recipe": RECIPE, "phases": ["deployment"]},
        deployment.tokens["maintainer"],
    )
    assert answer.status == 201, answer.body[:500]
    return int(answer.json()["id"])


def _run_row(deployment: Any, run: int) -> tuple[str, int, int | None]:
    row = deployment.sql(
        "SELECT status, attempts, evidence_id FROM validators_app_validationrun WHERE id = %s",
        (run,),
    )[0]
    return str(row[0]), int(row[1]), row[2]


def _wait_final(deployment: Any, run: int, timeout: float = 120) -> tuple[str, int, int | None]:
    wait_until(
        lambda: _run_row(deployment, run)[0] in FINAL,
        f"run {run} to finish",
        timeout,
        lambda: deployment.logs("worker", "beat"),
    )
    return _run_row(deployment, run)


def test_a_validation_run_on_the_simulated_cluster_passes_and_publishes(deployment: Any) -> None:
    sim, cluster = _register(deployment, "multihost-healthy", SCENARIOS["healthy-h100-eks"])
    try:
        before = _evidence_count(deployment)
        status, attempts, evidence = _wait_final(deployment, _start_run(deployment, cluster))
        assert (status, attempts) == ("passed", 1)
        assert evidence is not None
        assert _evidence_count(deployment) == before + 1
    finally:
        sim.stop()


def _slow_run_mid_check(deployment: Any, name: str) -> tuple[SimulatedCluster, int, str]:
    """A run on a slow simulated cluster, once one check has passed and the next is in flight:
    (the simulator, the run, the worker host running it)."""
    slow = replace(SCENARIOS["healthy-h100-eks"], time_scale=0.02, min_container_wall_s=0.5)
    sim, cluster = _register(deployment, name, slow)
    received = {n: deployment.host(n).log_text("worker").count(RUN_RECEIVED) for n in WORKER_HOSTS}
    run = _start_run(deployment, cluster)

    def mid_run() -> bool:
        statuses = {
            row[0]
            for row in deployment.sql(
                "SELECT status FROM validators_app_checkrun WHERE run_id = %s", (run,)
            )
        }
        return {"passed", "running"} <= statuses

    try:
        wait_until(mid_run, "a finished check and one in flight", 90, deployment.logs)
    except BaseException:
        sim.stop()
        raise
    runner = next(
        n
        for n in WORKER_HOSTS
        if deployment.host(n).log_text("worker").count(RUN_RECEIVED) > received[n]
    )
    return sim, run, runner


def test_a_worker_host_killed_mid_run_resumes_on_the_other_and_publishes_once(
    deployment: Any,
) -> None:
    before = _evidence_count(deployment)
    sim, run, holder = _slow_run_mid_check(deployment, "multihost-kill-worker")
    try:
        killed = deployment.host(holder).kill_all(signal.SIGKILL)
        assert killed >= 1
        status, attempts, evidence = _wait_final(deployment, run, timeout=120 + STALE_SECONDS)
        assert (status, attempts) == ("passed", 2)  # taken over once, by the other host
        assert evidence is not None
        published = _evidence_count(deployment) - before
        figures["worker killed: runs lost, published twice"] = (
            int(status != "passed"),
            max(0, published - 1),
        )
        assert published == 1
        survivor = next(n for n in WORKER_HOSTS if n != holder)
        assert RUN_RECEIVED in deployment.host(survivor).log_text("worker")
    finally:
        sim.stop()
        deployment.start_worker(holder)


def _upload_all(deployment: Any, indexes: list[int], during: Any = None) -> list[Answer]:
    pool = ThreadPoolExecutor(max_workers=8)
    futures = [pool.submit(deployment.upload, i) for i in indexes]
    if during is not None:
        during()
    answers = [f.result() for f in futures]
    pool.shutdown()
    return answers


def test_a_web_host_killed_under_load_loses_no_upload_and_stores_none_twice(
    deployment: Any,
) -> None:
    before = _evidence_count(deployment)
    two_hosts = list(range(1, 15))
    started = time.perf_counter()
    answers = _upload_all(deployment, two_hosts)
    figures["uploads/s, two web hosts"] = len(two_hosts) / (time.perf_counter() - started)
    assert Counter(a.status for a in answers) == {201: len(two_hosts)}

    under_fault = list(range(15, 30))
    gets: list[Answer] = []

    def kill_web1() -> None:
        time.sleep(0.5)
        deployment.host("web1").kill_all(signal.SIGKILL)
        gets.extend(deployment.request("/recipes/") for _ in range(5))

    answers = _upload_all(deployment, under_fault, during=kill_web1)
    statuses = Counter(a.status for a in answers)
    # An upload in flight on the killed host gets nginx's 502 (a POST is never sent twice);
    # none gets a 500, and the client's retry settles each one.
    assert set(statuses) <= {201, 502}, statuses
    assert {g.status for g in gets} == {200}
    retried = [
        deployment.upload(i) for i, a in zip(under_fault, answers, strict=True) if a.status != 201
    ]
    assert {a.status for a in retried} <= {200, 201}

    one_host = list(range(30, BUNDLES))
    started = time.perf_counter()
    answers = _upload_all(deployment, one_host)
    figures["uploads/s, one web host"] = len(one_host) / (time.perf_counter() - started)
    assert Counter(a.status for a in answers) == {201: len(one_host)}

    stored = _evidence_count(deployment) - before
    expected = len(two_hosts) + len(under_fault) + len(one_host)
    figures["web killed: uploads lost, stored twice"] = (
        max(0, expected - stored),
        max(0, stored - expected),
    )
    assert stored == expected
    torn = deployment.sql(
        "SELECT count(*) FROM evidence_app_evidence WHERE size = 0 OR length(content) <> size"
    )[0][0]
    assert torn == 0
    deployment.start_web("web1")
    wait_until(
        lambda: (
            deployment.host("client").call(
                _direct,
                deployment.host("web1").address,
                "/health",
                deployment.hosts["proxy"].address,
            )
            != b""
        ),
        "web1 back",
        60,
        deployment.logs,
    )


def test_postgresql_restarted_under_load_answers_503_with_retry_after_then_recovers(
    deployment: Any,
) -> None:
    answers: list[Answer] = []
    stop = threading.Event()

    def load() -> None:
        while not stop.is_set():
            for path in ("/recipes/", "/api/v1/evidence/", "/evidence/"):
                answers.append(deployment.request(path, timeout=30))

    threads = [threading.Thread(target=load) for _ in range(3)]
    for thread in threads:
        thread.start()
    time.sleep(1)
    deployment.host("db").kill_all(signal.SIGKILL)  # the database host crashes
    time.sleep(3)
    deployment.start_postgres()
    wait_until(deployment.ready, "/ready after PostgreSQL came back", 90, deployment.logs)
    time.sleep(2)
    stop.set()
    for thread in threads:
        thread.join()
    statuses = Counter(a.status for a in answers)
    figures["PostgreSQL restart: statuses"] = dict(statuses)
    assert set(statuses) <= {200, 503}, statuses
    assert statuses[503] >= 1  # it was down while the load ran
    assert all(a.headers.get("Retry-After") for a in answers if a.status == 503)
    assert answers[-1].status == 200  # recovered, nothing restarted but PostgreSQL


def _upload_row(deployment: Any, upload: int) -> tuple[str, str, int, int | None]:
    row = deployment.sql(
        "SELECT state, outcome, attempts, evidence_id FROM evidence_app_uploadlog WHERE id = %s",
        (upload,),
    )[0]
    return str(row[0]), str(row[1]), int(row[2]), row[3]


def _queue_ingest(deployment: Any, index: int, hold_seconds: float = 0.0) -> tuple[int, str, str]:
    """An OCI-reference upload of bundle ``index`` from the test's registry: (its upload id,
    the reference, the evidence layer's digest)."""
    ref, layer = deployment.registry.push(deployment.bundles[index], hold_seconds=hold_seconds)
    answer = deployment.oci_upload(ref)
    assert answer.status == 202, answer.body[:500]
    return int(answer.json()["upload_id"]), ref, layer


def _wait_ingested(deployment: Any, upload: int, timeout: float = 90) -> tuple[str, int]:
    wait_until(
        lambda: _upload_row(deployment, upload)[0] == "done",
        f"upload {upload} to be ingested",
        timeout,
        lambda: deployment.logs("worker"),
    )
    _, outcome, attempts, _ = _upload_row(deployment, upload)
    return outcome, attempts


def _stored_from(deployment: Any, ref: str) -> int:
    return int(
        deployment.sql("SELECT count(*) FROM evidence_app_evidence WHERE oci_ref = %s", (ref,))[0][
            0
        ]
    )


INGESTS_THROUGH_REDIS = range(41, 45)


def test_a_run_and_ingests_queued_while_redis_restarts_are_each_done_once(
    deployment: Any,
) -> None:
    sim, cluster = _register(deployment, "multihost-redis", SCENARIOS["healthy-h100-eks"])
    try:
        for name in WORKER_HOSTS:
            pause(deployment.host(name))  # nothing takes a message before Redis restarts
        before = _evidence_count(deployment)
        run = _start_run(deployment, cluster)
        assert _run_row(deployment, run)[0] == "queued"
        ingests = [_queue_ingest(deployment, i) for i in INGESTS_THROUGH_REDIS]
        assert {_upload_row(deployment, u)[0] for u, _, _ in ingests} == {"pending"}
        # Every message is in Redis, and only there: the web process sent them after commit.
        deployment.host("redis").kill_all(signal.SIGKILL)
        deployment.start_redis()
        wait_until(deployment.ready, "/ready after Redis came back", 60, deployment.logs)
        for name in WORKER_HOSTS:
            resume(deployment.host(name))
        status, attempts, evidence = _wait_final(deployment, run)
        done = [(_wait_ingested(deployment, u), ref, layer) for u, ref, layer in ingests]
        figures["Redis restart: runs lost, run twice"] = (int(status != "passed"), attempts - 1)
        stored = [_stored_from(deployment, ref) for _, ref, _ in done]
        pulled = [len(deployment.registry.pulls(layer)) for _, _, layer in done]
        figures["Redis restart: queued ingests lost, stored twice, pulled twice"] = (
            sum(1 for n in stored if n == 0),
            sum(n - 1 for n in stored if n > 1),
            sum(n - 1 for n in pulled if n > 1),
        )
        assert (status, attempts) == ("passed", 1)
        assert evidence is not None
        assert [result for result, _, _ in done] == [("created", 1)] * len(ingests)
        assert stored == [1] * len(ingests)
        assert pulled == [1] * len(ingests)
        assert _evidence_count(deployment) == before + 1 + len(ingests)
    finally:
        for name in WORKER_HOSTS:
            resume(deployment.host(name))
        sim.stop()


def test_sigterm_to_worker_hosts_mid_task_lets_each_task_finish_once(deployment: Any) -> None:
    """``docker stop`` of a worker: SIGTERM to its main process, which stops taking tasks and
    finishes the one in hand (Celery's warm shutdown) before it exits; acks late, so a task it
    could not finish would be delivered again."""
    stopped: list[str] = []
    before = _evidence_count(deployment)
    sim, run, runner = _slow_run_mid_check(deployment, "multihost-sigterm-worker")
    try:
        # The other host takes the ingest (the runner's one slot is busy); its pull of the
        # evidence layer is held 4 s, so the SIGTERM lands while it is in flight.
        upload, ref, layer = _queue_ingest(deployment, 45, hold_seconds=4)
        wait_until(
            lambda: bool(deployment.registry.pulls(layer)),
            "the ingest's pull to start",
            60,
            deployment.logs,
        )
        puller = {
            name
            for name in WORKER_HOSTS
            if deployment.host(name).address == deployment.registry.pulls(layer)[0].client
        }
        assert puller == set(WORKER_HOSTS) - {runner}
        assert _upload_row(deployment, upload)[0] == "running"
        assert _run_row(deployment, run)[0] == "running"
        with ThreadPoolExecutor(max_workers=2) as pool:
            codes = dict(
                zip(
                    WORKER_HOSTS,
                    pool.map(lambda n: deployment.host(n).stop(signal.SIGTERM, 120), WORKER_HOSTS),
                    strict=True,
                )
            )
        stopped = list(WORKER_HOSTS)
        # Both exited on their own, cleanly, after finishing what they held.
        assert codes == {n: [0] for n in WORKER_HOSTS}, deployment.logs("worker")
        status, attempts, evidence = _run_row(deployment, run)
        outcome, upload_attempts = _wait_ingested(deployment, upload, timeout=1)
        published = _evidence_count(deployment) - before
        figures["worker SIGTERM: run, ingest lost; done twice"] = (
            int(status != "passed") + int(outcome != "created"),
            (attempts - 1) + (upload_attempts - 1) + max(0, published - 2),
        )
        assert (status, attempts) == ("passed", 1)
        assert evidence is not None
        assert (outcome, upload_attempts) == ("created", 1)
        assert _stored_from(deployment, ref) == 1
        assert len(deployment.registry.pulls(layer)) == 1
        assert published == 2
        for name in WORKER_HOSTS:
            assert "Warm shutdown" in deployment.host(name).log_text("worker")
    finally:
        sim.stop()
        for name in stopped or WORKER_HOSTS:
            if not deployment.host(name).processes:
                deployment.start_worker(name)


def test_sigterm_to_a_web_host_under_load_answers_every_request_it_had(deployment: Any) -> None:
    """``docker stop`` of a web host: gunicorn stops accepting, answers what it holds (within
    --graceful-timeout) and exits; nginx sends what comes next to the other host.

    gunicorn's own worker kept its port open (not accepting) through the grace period, and the
    POSTs nginx sent into its backlog meanwhile answered 502 at its exit (3 of 90 in one run);
    aicr_site.gunicorn_worker closes the port when accepting stops (0 of 108 since). What is
    left is a connection made in the instant between its last accept and the close: reset, a
    GET goes on to web2, a POST answers 502 and the client's retry settles it (at most one is
    allowed here; more means the port stayed open)."""
    answers: list[Answer] = []
    uploads: list[tuple[int, Answer]] = []
    stop = threading.Event()
    before = _evidence_count(deployment)
    fresh = iter(range(46, 50))
    lock = threading.Lock()

    def load() -> None:
        while not stop.is_set():
            with lock:
                index = next(fresh, None)
            # New bundles first (each stored once), then known ones (200, the stored record).
            index = index if index is not None else 1 + len(answers) % 14
            uploads.append((index, deployment.upload(index)))
            answers.append(uploads[-1][1])
            answers.append(deployment.request("/recipes/", timeout=30))
            answers.append(deployment.request("/evidence/", timeout=30))

    threads = [threading.Thread(target=load) for _ in range(6)]
    for thread in threads:
        thread.start()
    try:
        time.sleep(1.5)
        # One request surely in web1's hands at the SIGTERM: an audit package (built and
        # signed per request, the slowest answer) asked of web1 itself, not through nginx.
        audit = (
            deployment.host("client")
            .pool()
            .submit(
                _direct,
                deployment.host("web1").address,
                "/api/v1/export/audit.tar.gz",
                deployment.hosts["proxy"].address,
                deployment.tokens["maintainer"],
            )
        )
        time.sleep(0.1)
        sent = time.time()
        started = time.perf_counter()
        codes = deployment.host("web1").stop(signal.SIGTERM, 60)
        exit_seconds = time.perf_counter() - started
        time.sleep(1.5)  # and the load goes on against web2 alone
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    statuses = Counter(a.status for a in answers)
    web1 = deployment.host("web1").address
    after = [row for row in deployment.proxied() if row[0] > sent]
    # web1 closed its port at the SIGTERM: what it answered after was in its hands before.
    held = Counter(status for _, status, _, hosts in after if hosts[-1] == web1)
    moved_on = sum(1 for *_, hosts in after if hosts[:1] == [web1] and len(hosts) > 1)
    failed = Counter(method for _, status, method, _ in after if status >= 500)
    figures[
        "web SIGTERM under load: statuses; held by it then answered; moved on; 5xx; s to exit"
    ] = (dict(statuses), dict(held), moved_on, dict(failed), round(exit_seconds, 2))
    assert codes == [0], deployment.logs("gunicorn")
    assert audit.result(timeout=60)[:2] == b"\x1f\x8b"  # answered whole after the SIGTERM
    assert set(statuses) <= {200, 201, 502}, (statuses, deployment.logs("nginx"))
    assert set(failed) <= {"POST"}  # a GET nginx could not place on web1 went on to web2
    assert sum(failed.values()) <= 1, failed
    retried = [deployment.upload(i) for i, a in uploads if a.status == 502]
    assert {a.status for a in retried} <= {200, 201}
    assert _evidence_count(deployment) == before + 4  # each new upload stored once
    deployment.start_web("web1")
    wait_until(
        lambda: (
            deployment.host("client").call(
                _direct,
                deployment.host("web1").address,
                "/health",
                deployment.hosts["proxy"].address,
            )
            != b""
        ),
        "web1 back",
        60,
        deployment.logs,
    )


def test_two_beats_make_one_reaper_pass_at_a_time(deployment: Any) -> None:
    deployment.start_beat("beat2")
    skipped = sum(deployment.host(n).log_text("worker").count(REAPER_SKIPPED) for n in WORKER_HOSTS)
    key = _advisory_key(REAPER_LOCK)
    held = threading.Event()
    release = threading.Event()

    def hold() -> None:
        import psycopg

        from tests.deploy.deployment import DB_PASSWORD

        with psycopg.connect(
            host=deployment.host("db").address,
            dbname="aicr",
            user="aicr",
            password=DB_PASSWORD,
            autocommit=True,
        ) as conn:
            conn.execute("SELECT pg_advisory_lock(%s)", (key,))
            held.set()
            release.wait(60)

    holder = deployment.host("client").pool().submit(hold)
    try:
        assert held.wait(30)

        def both_beats_skipped() -> bool:
            now = sum(
                deployment.host(n).log_text("worker").count(REAPER_SKIPPED) for n in WORKER_HOSTS
            )
            return now >= skipped + 4

        wait_until(
            both_beats_skipped,
            "reaper passes to skip while a pass holds the lock",
            60,
            deployment.logs,
        )
    finally:
        release.set()
        holder.result(timeout=30)
        deployment.host("beat2").kill_all(signal.SIGKILL)
    beats = deployment.host("beat").log_text("beat") + deployment.host("beat2").log_text("beat")
    assert beats.count("validators_app.tasks.runs_reap") >= 2


def test_figures(deployment: Any) -> None:
    """Printed for docs/benchmarks.md (run with -s)."""
    print("\n[multihost] " + "; ".join(f"{k}: {v}" for k, v in figures.items()))
