"""The runs and clusters surfaces attacked as an attacker and a careless user would: every field
of the API with wrong types, huge and negative numbers, NUL, unknown names, duplicates; bodies
that are not JSON; ids that do not fit a database integer; every page and partial per role;
CSRF; cancel by the wrong people or at the wrong time. Never a 500; a 400 names the field;
nothing is stored by a refused request."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from evidence_app.models import Role
from evidence_app.services.tokens import token_create, user_with_role
from tests.validators_app.runs_support import RECIPE, cluster_row, outcome, publish_nothing
from validators_app import orchestrator
from validators_app.models import Cluster, RunStatus, ValidationRun
from validators_app.services import runs

pytestmark = pytest.mark.django_db

HUGE = 2**63  # one past PostgreSQL's bigint and SQLite's INTEGER
ROLES = (None, Role.CONTRIBUTOR, Role.AUDITOR, Role.MAINTAINER)


def token_client(role: str | None) -> Client:
    client = Client()
    if role:
        user = user_with_role(username=f"{role}-attack-token", role=role)
        client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {token_create(user=user, role=role)[1]}"
    return client


def session_client(role: str | None, *, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    if role:
        client.force_login(user_with_role(username=f"{role}-attack-page", role=role))
    return client


@pytest.fixture
def maintainer() -> Client:
    return token_client(Role.MAINTAINER)


@pytest.fixture
def cluster() -> Cluster:
    return cluster_row()


def post_json(client: Client, path: str, body: Any) -> Any:
    return client.post(path, json.dumps(body), content_type="application/json")


def _names_the_field(detail: str, fragment: str) -> bool:
    """``<field>: <reason>`` from the view, or the request guards' ``request body: <field>…``
    (NUL anywhere in the JSON; a body over the site's cap is named as the body)."""
    field = fragment.split(":", 1)[0]
    return (
        detail.startswith(fragment)
        or detail.startswith((f"request body: {field} ", f"request body: {field}["))
        or (detail.startswith("request body: ") and "exceeds the limit" in detail)
    )


# --- POST /api/v1/runs/ -------------------------------------------------------------------------

C = "CLUSTER"  # replaced by the test cluster's id
BAD_RUN_BODIES: dict[str, tuple[Any, str]] = {
    "cluster-missing": ({"recipe": RECIPE}, "cluster:"),
    "cluster-null": ({"cluster": None, "recipe": RECIPE}, "cluster:"),
    "cluster-bool": ({"cluster": True, "recipe": RECIPE}, "cluster:"),
    "cluster-float": ({"cluster": 1.5, "recipe": RECIPE}, "cluster:"),
    "cluster-list": ({"cluster": [1], "recipe": RECIPE}, "cluster:"),
    "cluster-object": ({"cluster": {"id": 1}, "recipe": RECIPE}, "cluster:"),
    "cluster-negative": ({"cluster": -1, "recipe": RECIPE}, "cluster:"),
    "cluster-zero": ({"cluster": 0, "recipe": RECIPE}, "cluster:"),
    "cluster-huge": ({"cluster": HUGE, "recipe": RECIPE}, "cluster:"),
    "cluster-huge-string": ({"cluster": "9" * 400, "recipe": RECIPE}, "cluster:"),
    "cluster-nul": ({"cluster": "1\x00", "recipe": RECIPE}, "cluster:"),
    "recipe-missing": ({"cluster": C}, "recipe:"),
    "recipe-empty": ({"cluster": C, "recipe": ""}, "recipe:"),
    "recipe-blank": ({"cluster": C, "recipe": "   "}, "recipe:"),
    "recipe-null": ({"cluster": C, "recipe": None}, "recipe:"),
    "recipe-number": ({"cluster": C, "recipe": 7}, "recipe:"),
    "recipe-list": ({"cluster": C, "recipe": [RECIPE]}, "recipe:"),
    "recipe-object": ({"cluster": C, "recipe": {"name": RECIPE}}, "recipe:"),
    "recipe-unknown": ({"cluster": C, "recipe": "no-such-recipe"}, "recipe: no recipe named"),
    "recipe-nul": ({"cluster": C, "recipe": RECIPE + "\x00"}, "recipe:"),
    "recipe-huge": ({"cluster": C, "recipe": "r" * 100_000}, "recipe:"),
    "recipe-traversal": ({"cluster": C, "recipe": "../../etc/passwd"}, "recipe: no recipe"),
    "recipe-html": ({"cluster": C, "recipe": "<script>x</script>"}, "recipe: no recipe"),
    "phases-string": ({"cluster": C, "recipe": RECIPE, "phases": "deployment"}, "phases:"),
    "phases-object": ({"cluster": C, "recipe": RECIPE, "phases": {"deployment": 1}}, "phases:"),
    "phases-null-item": ({"cluster": C, "recipe": RECIPE, "phases": [None]}, "phases:"),
    "phases-number-item": ({"cluster": C, "recipe": RECIPE, "phases": [1]}, "phases:"),
    "phases-nested": ({"cluster": C, "recipe": RECIPE, "phases": [["deployment"]]}, "phases:"),
    "phases-unknown": ({"cluster": C, "recipe": RECIPE, "phases": ["bogus"]}, "phases:"),
    "phases-nul": ({"cluster": C, "recipe": RECIPE, "phases": ["deployment\x00"]}, "phases:"),
    "phases-all-and-one": (
        {"cluster": C, "recipe": RECIPE, "phases": ["all", "deployment"]},
        'phases: phase "all" cannot be combined',
    ),
    "phases-too-many": (
        {"cluster": C, "recipe": RECIPE, "phases": ["deployment"] * 1000},
        "phases:",
    ),
    "phases-huge-item": ({"cluster": C, "recipe": RECIPE, "phases": ["d" * 100_000]}, "phases:"),
}


@pytest.mark.parametrize("body", BAD_RUN_BODIES.values(), ids=BAD_RUN_BODIES.keys())
def test_bad_run_starts_are_400s_naming_the_field(
    maintainer: Client, cluster: Cluster, real_catalog: Any, body: tuple[Any, str]
) -> None:
    payload, fragment = body
    payload = {k: cluster.pk if v == C else v for k, v in payload.items()}
    response = post_json(maintainer, "/api/v1/runs/", payload)
    assert response.status_code == 400, response.content
    assert _names_the_field(response.json()["detail"], fragment), response.json()
    assert not ValidationRun.objects.exists()


@pytest.mark.parametrize(
    ("phases", "stored"),
    [
        (["deployment", "deployment"], ["deployment"]),
        (["performance", "deployment", "performance"], ["performance", "deployment"]),
        (["all"], ["deployment", "conformance", "performance"]),
        ([], ["deployment", "conformance", "performance"]),
        ([" Deployment "], ["deployment"]),
    ],
    ids=["duplicate", "duplicate-keeps-order", "all-alone", "empty-is-default", "case-and-space"],
)
def test_duplicate_and_default_phases_follow_aicrs_selection(
    maintainer: Client,
    cluster: Cluster,
    real_catalog: Any,
    django_capture_on_commit_callbacks: Any,
    phases: list[str],
    stored: list[str],
) -> None:
    with django_capture_on_commit_callbacks(execute=False):
        response = post_json(
            maintainer, "/api/v1/runs/", {"cluster": cluster.pk, "recipe": RECIPE, "phases": phases}
        )
    assert response.status_code == 201, response.content
    assert ValidationRun.objects.get().phases == stored


@pytest.mark.parametrize(
    ("content_type", "raw"),
    [
        ("application/json", b""),
        ("application/json", b"null"),
        ("application/json", b'"a string"'),
        ("application/json", b"42"),
        ("application/json", b"[]"),
        ("application/json", b"{"),
        ("application/json", b'{"cluster": 1, "recipe": "x"'),
        ("application/json", b'{"cluster": NaN, "recipe": "x"}'),
        ("application/json", b'{"cluster": 1e999, "recipe": "x"}'),
        ("application/json", b"\xff\xfe{}"),
        ("application/json", b'{"recipe": "\\ud800"}'),
        ("application/json", b"[" * 100_000),
        ("application/x-www-form-urlencoded", b"cluster=1&recipe=x"),
        ("multipart/form-data; boundary=x", b"--x\r\nContent-Disposition: form-data\r\n\r\n"),
        ("text/plain", b'{"cluster": 1, "recipe": "x"}'),
        ("application/yaml", b"cluster: 1\nrecipe: x\n"),
    ],
    ids=[
        "empty",
        "null",
        "string",
        "number",
        "array",
        "truncated",
        "unterminated",
        "nan",
        "infinite",
        "not-utf8",
        "lone-surrogate",
        "deep-nesting",
        "form-encoded",
        "multipart",
        "text-plain",
        "yaml",
    ],
)
def test_bodies_that_are_not_a_json_object_are_refused_with_a_reason(
    maintainer: Client, cluster: Cluster, real_catalog: Any, content_type: str, raw: bytes
) -> None:
    response = maintainer.post("/api/v1/runs/", raw, content_type=content_type)
    assert response.status_code in (400, 415), response.content
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["detail"]
    assert not ValidationRun.objects.exists()


def test_a_start_on_a_cluster_someone_else_is_running_is_a_409(
    cluster: Cluster, real_catalog: Any, django_capture_on_commit_callbacks: Any
) -> None:
    alice = token_client(Role.MAINTAINER)
    bob = Client()
    bob_user = user_with_role(username="bob-maintainer", role=Role.MAINTAINER)
    bob.defaults["HTTP_AUTHORIZATION"] = (
        f"Bearer {token_create(user=bob_user, role=Role.MAINTAINER)[1]}"
    )
    with django_capture_on_commit_callbacks(execute=False):
        first = post_json(alice, "/api/v1/runs/", {"cluster": cluster.pk, "recipe": RECIPE})
        second = post_json(bob, "/api/v1/runs/", {"cluster": cluster.pk, "recipe": RECIPE})
    assert first.status_code == 201
    assert second.status_code == 409
    assert second.json()["active_run"]["id"] == first.json()["id"]
    assert ValidationRun.objects.count() == 1


# --- reads and ids -------------------------------------------------------------------------------

BAD_IDS = ["0", "-1", str(HUGE), "9" * 40, "abc", "1.5", "%00", "1%20", "..%2f"]


@pytest.mark.parametrize("pk", BAD_IDS)
@pytest.mark.parametrize(
    "template",
    [
        "/api/v1/runs/{}/",
        "/api/v1/runs/{}/ctrf.json",
        "/runs/{}/",
        "/clusters/{}/",
    ],
)
def test_ids_that_name_nothing_are_404s_not_500s(template: str, pk: str) -> None:
    client = session_client(Role.MAINTAINER)
    response = client.get(template.format(pk))
    assert response.status_code in (400, 404), (template, pk, response.status_code)


@pytest.mark.parametrize("pk", BAD_IDS)
@pytest.mark.parametrize(
    "template",
    [
        "/api/v1/runs/{}/cancel/",
        "/api/v1/clusters/{}/test/",
        "/runs/{}/cancel/",
        "/clusters/{}/test/",
    ],
)
def test_writes_to_ids_that_name_nothing_are_404s_not_500s(template: str, pk: str) -> None:
    api = template.startswith("/api/")
    client = token_client(Role.MAINTAINER) if api else session_client(Role.MAINTAINER)
    response = client.post(template.format(pk))
    assert response.status_code in (400, 404), (template, pk, response.status_code)


@pytest.mark.parametrize(
    "query",
    [
        "cluster=abc",
        "cluster=-1",
        f"cluster={HUGE}",
        "cluster=" + "9" * 400,
        "status=bogus",
        "status=",
        "recipe=" + "r" * 10_000,
        "recipe=%00",
        "page=0",
        "page=-1",
        f"page={HUGE}",
        "page=last",
        "page_size=-5",
        f"page_size={HUGE}",
        "page_size=abc",
        "ordering=password",
    ],
)
def test_list_filters_never_500(query: str) -> None:
    for path in ("/api/v1/runs/", "/runs/"):
        response = Client().get(f"{path}?{query}")
        assert response.status_code in (200, 400, 404), (path, query, response.status_code)


@pytest.mark.parametrize(
    "query", ["status=bogus", "status=%00", f"page={HUGE}", "page=-1", "status=" + "x" * 5000]
)
def test_the_cluster_list_page_never_500s(query: str) -> None:
    response = session_client(Role.MAINTAINER).get(f"/clusters/?{query}")
    assert response.status_code in (200, 400, 404), (query, response.status_code)


# --- clusters API ----------------------------------------------------------------------------

BAD_CLUSTER_BODIES: dict[str, tuple[Any, str]] = {
    "name-missing": ({"kubeconfig": "x", "environment": "simulated"}, "name:"),
    "name-list": ({"name": ["a"], "kubeconfig": "x", "environment": "simulated"}, "name:"),
    "name-nul": ({"name": "a\x00b", "kubeconfig": "x", "environment": "simulated"}, "name:"),
    "name-huge": ({"name": "n" * 100_000, "kubeconfig": "x", "environment": "simulated"}, "name:"),
    "kubeconfig-missing": ({"name": "a", "environment": "simulated"}, "kubeconfig:"),
    "kubeconfig-object": (
        {"name": "a", "kubeconfig": {"apiVersion": "v1"}, "environment": "simulated"},
        "kubeconfig:",
    ),
    "kubeconfig-nul": (
        {"name": "a", "kubeconfig": "a\x00", "environment": "simulated"},
        "kubeconfig:",
    ),
    "environment-bogus": ({"name": "a", "kubeconfig": "x", "environment": "prod"}, "environment:"),
    "environment-number": ({"name": "a", "kubeconfig": "x", "environment": 1}, "environment:"),
    "environment-null": ({"name": "a", "kubeconfig": "x", "environment": None}, "environment:"),
}


@pytest.mark.parametrize("body", BAD_CLUSTER_BODIES.values(), ids=BAD_CLUSTER_BODIES.keys())
def test_bad_cluster_registrations_are_400s(maintainer: Client, body: tuple[Any, str]) -> None:
    payload, fragment = body
    response = post_json(maintainer, "/api/v1/clusters/", payload)
    assert response.status_code == 400, response.content
    assert _names_the_field(response.json()["detail"], fragment), response.json()
    assert not Cluster.objects.exists()


@pytest.mark.parametrize(
    ("content_type", "raw"),
    [
        ("application/json", b"[]"),
        ("application/json", b"null"),
        ("application/json", b"{"),
        ("application/x-www-form-urlencoded", b"name=a&kubeconfig=x&environment=simulated"),
        ("text/plain", b"{}"),
    ],
    ids=["array", "null", "truncated", "form-encoded", "text-plain"],
)
def test_cluster_bodies_that_are_not_json_objects_are_refused(
    maintainer: Client, content_type: str, raw: bytes
) -> None:
    response = maintainer.post("/api/v1/clusters/", raw, content_type=content_type)
    assert response.status_code in (400, 415), response.content
    assert response.json()["detail"]
    assert not Cluster.objects.exists()


# --- permissions on every page, partial and API route -------------------------------------------


@pytest.fixture
def finished(
    cluster: Cluster, real_catalog: Any, django_capture_on_commit_callbacks: Any, monkeypatch: Any
) -> ValidationRun:
    publish_nothing(monkeypatch)
    with django_capture_on_commit_callbacks(execute=False):
        run = runs.run_start(cluster=cluster, recipe_name=RECIPE, phases=["deployment"])
    claim = runs.run_claim(run_id=run.pk)
    names = list(run.checks.values_list("name", flat=True))
    runs.run_finish(
        claim=claim,
        outcome=orchestrator.RunOutcome(
            status="passed",
            error="",
            snapshot_yaml="kind: Snapshot\n",
            phase_reports={"deployment": b"{}\n"},
            merged_report=b"{}\n",
            checks=tuple(outcome("deployment", n, "passed") for n in names),
        ),
    )
    run.refresh_from_db()
    return run


# (path template, who may read: the lowest role, None = public)
READS = [
    ("/runs/", None),
    ("/runs/{run}/", None),
    ("/api/v1/runs/", None),
    ("/api/v1/runs/{run}/", None),
    ("/api/v1/runs/{run}/ctrf.json", None),
    ("/clusters/", "maintainer-or-auditor"),
    ("/clusters/{cluster}/", "maintainer-or-auditor"),
    ("/clusters/new/", Role.MAINTAINER),
    ("/api/v1/clusters/", "maintainer-or-auditor"),
    ("/api/v1/clusters/{cluster}/", "maintainer-or-auditor"),
]


def _allowed(rule: str | None, role: str | None) -> bool:
    if rule is None:
        return True
    if rule == "maintainer-or-auditor":
        return role in (Role.MAINTAINER, Role.AUDITOR)
    return role == rule


@pytest.mark.parametrize("role", ROLES, ids=lambda r: r or "anonymous")
@pytest.mark.parametrize(("template", "rule"), READS, ids=[t for t, _ in READS])
def test_every_read_per_role(
    finished: ValidationRun, template: str, rule: str | None, role: str | None
) -> None:
    path = template.format(run=finished.pk, cluster=finished.cluster_id)
    api = path.startswith("/api/")
    client = token_client(role) if api else session_client(role)
    for headers in ({}, {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "run-live"}):
        response = client.get(path, **headers)
        if _allowed(rule, role):
            assert response.status_code == 200, (path, role, response.status_code)
        else:
            assert response.status_code in (302, 401, 403, 404), (path, role, response.status_code)
            assert finished.cluster.server.encode() not in response.content


@pytest.mark.parametrize(
    "role", [None, Role.CONTRIBUTOR, Role.AUDITOR], ids=lambda r: r or "anonymous"
)
def test_only_maintainers_cancel_or_start_from_the_pages(
    cluster: Cluster, real_catalog: Any, django_capture_on_commit_callbacks: Any, role: str | None
) -> None:
    with django_capture_on_commit_callbacks(execute=False):
        run = runs.run_start(cluster=cluster, recipe_name=RECIPE, phases=["deployment"])
    client = session_client(role)
    with django_capture_on_commit_callbacks(execute=False):
        cancel = client.post(f"/runs/{run.pk}/cancel/")
        start = client.post(
            "/runs/start/", {"cluster": cluster.pk, "recipe": RECIPE, "phases": ["deployment"]}
        )
        api_cancel = token_client(role).post(f"/api/v1/runs/{run.pk}/cancel/")
    assert cancel.status_code in (302, 403), cancel.status_code
    assert start.status_code in (302, 403), start.status_code
    assert api_cancel.status_code in (401, 403), api_cancel.status_code
    run.refresh_from_db()
    assert (run.status, run.cancel_requested) == (RunStatus.QUEUED, False)
    assert ValidationRun.objects.count() == 1


def test_page_writes_need_the_csrf_token(
    cluster: Cluster, real_catalog: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False):
        run = runs.run_start(cluster=cluster, recipe_name=RECIPE, phases=["deployment"])
    client = session_client(Role.MAINTAINER, csrf=True)
    assert client.post(f"/runs/{run.pk}/cancel/").status_code == 403
    assert client.post("/runs/start/", {"cluster": cluster.pk, "recipe": RECIPE}).status_code == 403
    assert client.post(f"/clusters/{cluster.pk}/test/").status_code == 403
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED
    assert ValidationRun.objects.count() == 1


def test_cancelling_a_finished_run_changes_nothing(finished: ValidationRun) -> None:
    api = token_client(Role.MAINTAINER).post(f"/api/v1/runs/{finished.pk}/cancel/")
    assert api.status_code == 409
    assert "already finished (passed)" in api.json()["detail"]
    page = session_client(Role.MAINTAINER).post(f"/runs/{finished.pk}/cancel/")
    assert page.status_code == 409
    assert "already finished (passed)" in page.content.decode()
    finished.refresh_from_db()
    assert (finished.status, finished.cancel_requested) == (RunStatus.PASSED, False)


@pytest.mark.parametrize(
    "form",
    [
        {},
        {"cluster": "abc", "recipe": RECIPE},
        {"cluster": str(HUGE), "recipe": RECIPE},
        {"cluster": "-1", "recipe": RECIPE},
        {"cluster": "CLUSTER", "recipe": "nope"},
        {"cluster": "CLUSTER", "recipe": "r" * 100_000},
        {"cluster": "CLUSTER", "recipe": RECIPE, "phases": ["all", "deployment"]},
        {"cluster": "CLUSTER", "recipe": RECIPE, "phases": ["bogus"]},
    ],
    ids=[
        "empty",
        "cluster-word",
        "cluster-huge",
        "cluster-negative",
        "recipe-unknown",
        "recipe-huge",
        "phases-all-and-one",
        "phases-unknown",
    ],
)
def test_the_start_form_refuses_bad_input_without_a_500(
    cluster: Cluster, real_catalog: Any, form: dict[str, Any]
) -> None:
    form = {k: str(cluster.pk) if v == "CLUSTER" else v for k, v in form.items()}
    response = session_client(Role.MAINTAINER).post("/runs/start/", form)
    assert response.status_code in (200, 302, 400), response.status_code
    assert not ValidationRun.objects.exists()


# --- text from a hostile cluster is stored, never a database error --------------------------


def test_nul_from_the_cluster_in_an_error_or_a_check_is_stored_as_u_fffd(
    cluster: Cluster, real_catalog: Any, django_capture_on_commit_callbacks: Any, monkeypatch: Any
) -> None:
    """PostgreSQL text and jsonb cannot hold NUL; an agent log, an API server's message or a
    validator's termination message may. The run still ends, saying why."""
    publish_nothing(monkeypatch)
    with django_capture_on_commit_callbacks(execute=False):
        run = runs.run_start(cluster=cluster, recipe_name=RECIPE, phases=["deployment"])
    claim = runs.run_claim(run_id=run.pk)
    name = run.checks.first().name
    check = orchestrator.CheckOutcome(
        phase="deployment",
        name=name,
        status="failed",
        exit_code=1,
        message="bad\x00message",
        duration_ms=1000,
        stdout=("nul\x00line",),
        extra={"k\x00": "v\x00"},
        job_name="aicr-x-00000000",
    )
    runs.DbRunHooks(claim).check_finished(check)
    runs.run_finish(
        claim=claim,
        outcome=orchestrator.RunOutcome(
            status="error", error="agent log:\x00 forged", snapshot_yaml=None, checks=(check,)
        ),
    )
    run.refresh_from_db()
    assert (run.status, run.error) == (RunStatus.ERROR, "agent log:\ufffd forged")
    stored = run.checks.get(name=name)
    assert (stored.message, stored.stdout) == ("bad\ufffdmessage", ["nul\ufffdline"])
    assert stored.extra == {"k\ufffd": "v\ufffd"}
    assert Client().get(f"/runs/{run.pk}/").status_code == 200
    assert "agent log:\ufffd forged" in Client().get(f"/api/v1/runs/{run.pk}/").json()["error"]


# --- the live partial and the cluster partial, per role ---------------------------------------

HOSTILE_LINE = '<script>alert(1)</script><img src=x onerror=alert(2)>"\u202e\ufffd'


@pytest.mark.parametrize("role", ROLES, ids=lambda r: r or "anonymous")
def test_the_live_partial_of_a_running_run_is_public_escaped_and_bounded(
    cluster: Cluster,
    real_catalog: Any,
    django_capture_on_commit_callbacks: Any,
    role: str | None,
) -> None:
    with django_capture_on_commit_callbacks(execute=False):
        run = runs.run_start(cluster=cluster, recipe_name=RECIPE, phases=["deployment"])
    claim = runs.run_claim(run_id=run.pk)
    hooks = runs.DbRunHooks(claim)
    first, second = run.checks.values_list("name", flat=True)[:2]
    hooks.check_started("deployment", first, "aicr-a-00000000")
    hooks.check_finished(
        orchestrator.CheckOutcome(
            phase="deployment",
            name=first,
            status="other",
            exit_code=137,
            message=HOSTILE_LINE * 100,
            duration_ms=1000,
            stdout=tuple(f"{i} {HOSTILE_LINE * 5}" for i in range(1000)),
            extra={"note": HOSTILE_LINE},
            job_name="aicr-a-00000000",
        )
    )
    hooks.check_started("deployment", second, "aicr-b-00000000")

    client = session_client(role)
    partial = client.get(f"/runs/{run.pk}/", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="run-live")
    assert partial.status_code == 200
    assert "HX-Refresh" not in partial
    html = partial.content.decode()
    assert "<script>alert" not in html
    assert "<img src=x" not in html
    assert html.count("onerror=alert(2)") <= 40 * 5 + 100  # the last 40 lines + the message
    assert len(partial.content) < 400_000
    assert second in html  # the check running now
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert ("Cancel run" in page) is (role == Role.MAINTAINER)


@pytest.mark.parametrize(
    "role", [None, Role.CONTRIBUTOR, Role.AUDITOR], ids=lambda r: r or "anonymous"
)
def test_only_maintainers_test_a_connection(cluster: Cluster, role: str | None) -> None:
    htmx = session_client(role).post(f"/clusters/{cluster.pk}/test/", HTTP_HX_REQUEST="true")
    assert htmx.status_code == 403
    assert cluster.server.encode() not in htmx.content
    api = token_client(role).post(f"/api/v1/clusters/{cluster.pk}/test/")
    assert api.status_code in (401, 403)
    cluster.refresh_from_db()
    assert cluster.last_tested_at is None


def test_the_start_form_on_a_busy_cluster_names_the_active_run(
    cluster: Cluster, real_catalog: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False):
        active = runs.run_start(cluster=cluster, recipe_name=RECIPE, phases=["deployment"])
        response = session_client(Role.MAINTAINER).post(
            "/runs/start/", {"cluster": cluster.pk, "recipe": RECIPE, "phases": ["conformance"]}
        )
    assert response.status_code == 409
    assert f'href="/runs/{active.pk}/"' in response.content.decode()
    assert ValidationRun.objects.count() == 1
