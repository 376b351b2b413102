"""The runs API: maintainers start and cancel, everyone reads; bad input is a 400 naming the
field, a busy cluster a 409, and every response matches the OpenAPI description."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from django.test import Client
from openapi_core import OpenAPI
from openapi_core.contrib.django import DjangoOpenAPIRequest, DjangoOpenAPIResponse

from evidence_app.models import Role
from evidence_app.services.tokens import token_create, user_with_role
from tests.validators_app.runs_support import RECIPE, cluster_row
from validators_app import orchestrator
from validators_app.models import RunStatus, ValidationRun
from validators_app.services import runs

pytestmark = pytest.mark.django_db


def client_for(role: str | None) -> Client:
    c = Client()
    if role:
        user = user_with_role(username=f"{role}-user", role=role)
        c.defaults["HTTP_AUTHORIZATION"] = f"Bearer {token_create(user=user, role=role)[1]}"
    return c


@pytest.fixture
def maintainer() -> Client:
    return client_for(Role.MAINTAINER)


@pytest.fixture
def schema_check(db: None) -> Any:
    schema = yaml.safe_load(Client().get("/api/schema/").content)
    spec = OpenAPI.from_dict({**schema, "servers": [{"url": "http://testserver"}]})

    def check(response: Any) -> Any:
        spec.validate_response(
            DjangoOpenAPIRequest(response.wsgi_request), DjangoOpenAPIResponse(response)
        )
        return response

    return check


def post(client: Client, body: Any) -> Any:
    return client.post("/api/v1/runs/", body, content_type="application/json")


def test_a_maintainer_starts_a_run_and_anyone_reads_it(
    maintainer: Client,
    real_catalog: Any,
    schema_check: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    cluster = cluster_row()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = schema_check(
            post(maintainer, {"cluster": cluster.pk, "recipe": RECIPE, "phases": ["deployment"]})
        )
    assert response.status_code == 201, response.content
    body = response.json()
    assert set(body) == {"id", "url", "status"}
    assert body["status"] == "queued"
    assert response["Location"] == body["url"]
    assert len(callbacks) == 1

    detail = schema_check(Client().get(body["url"]))
    assert detail.status_code == 200
    run = detail.json()
    assert {
        "id",
        "status",
        "phase",
        "error",
        "checks",
        "evidence",
        "started_at",
        "finished_at",
    } <= (set(run))
    assert run["evidence"] is None
    assert run["cluster"] == {"id": cluster.pk, "name": cluster.name, "environment": "simulated"}
    assert "server" not in str(run["cluster"])
    assert [c["phase"] for c in run["checks"]] == ["deployment"] * len(run["checks"])
    assert run["checks"][0].keys() >= {"name", "phase", "status", "message", "duration_ms"}

    listing = schema_check(Client().get("/api/v1/runs/", {"cluster": cluster.pk}))
    assert [r["id"] for r in listing.json()["results"]] == [body["id"]]
    assert Client().get("/api/v1/runs/", {"status": "passed"}).json()["count"] == 0
    assert Client().get("/api/v1/runs/", {"recipe": RECIPE}).json()["count"] == 1
    assert Client().get("/api/v1/runs/", {"status": "bogus"}).status_code == 400


@pytest.mark.parametrize("role", [None, Role.CONTRIBUTOR, Role.AUDITOR])
def test_only_maintainers_write(role: str | None, real_catalog: Any) -> None:
    cluster = cluster_row()
    response = post(client_for(role), {"cluster": cluster.pk, "recipe": RECIPE})
    assert response.status_code == (401 if role is None else 403)
    assert not ValidationRun.objects.exists()


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"recipe": RECIPE}, "cluster: This field is required."),
        ({"cluster": "one", "recipe": RECIPE}, "cluster: A valid integer is required."),
        ({"cluster": 999999, "recipe": RECIPE}, "cluster: there is no cluster with id 999999"),
        ({"cluster": "CLUSTER"}, "recipe: This field is required."),
        ({"cluster": "CLUSTER", "recipe": "nope"}, "recipe: no recipe named 'nope'"),
        ({"cluster": "CLUSTER", "recipe": RECIPE, "phases": ["x"]}, "phases: unknown phase 'x'"),
        ({"cluster": "CLUSTER", "recipe": RECIPE, "phases": "deployment"}, "phases:"),
        (
            {"cluster": "CLUSTER", "recipe": RECIPE, "phases": ["all", "performance"]},
            'phases: phase "all" cannot be combined',
        ),
        ([1, 2], "must be a JSON object"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(
    maintainer: Client, real_catalog: Any, schema_check: Any, body: Any, fragment: str
) -> None:
    cluster = cluster_row()
    if isinstance(body, dict) and body.get("cluster") == "CLUSTER":
        body = {**body, "cluster": cluster.pk}
    response = schema_check(post(maintainer, body))
    assert response.status_code == 400
    assert fragment in response.json()["detail"]
    assert not ValidationRun.objects.exists()


@pytest.mark.parametrize(
    "raw", [b"{not json", b"\xff\xfe", b'{"cluster": ' + b"[" * 100 + b"]" * 100 + b"}"]
)
def test_malformed_bodies_are_400s(maintainer: Client, raw: bytes) -> None:
    response = maintainer.post("/api/v1/runs/", raw, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["detail"]


def test_a_busy_cluster_is_a_409_naming_the_active_run(
    maintainer: Client,
    real_catalog: Any,
    schema_check: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    cluster = cluster_row()
    with django_capture_on_commit_callbacks(execute=False):
        first = post(maintainer, {"cluster": cluster.pk, "recipe": RECIPE}).json()
        second = schema_check(post(maintainer, {"cluster": cluster.pk, "recipe": RECIPE}))
    assert second.status_code == 409
    assert second["X-Active-Run"] == str(first["id"])
    assert second.json()["active_run"]["id"] == first["id"]
    assert "already has an active run" in second.json()["detail"]
    assert ValidationRun.objects.count() == 1


def test_cancel_and_ctrf(
    maintainer: Client,
    real_catalog: Any,
    schema_check: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    with django_capture_on_commit_callbacks(execute=False):
        run = runs.run_start(cluster=cluster_row(), recipe_name=RECIPE)
    ctrf = schema_check(Client().get(f"/api/v1/runs/{run.pk}/ctrf.json"))
    assert ctrf.status_code == 404
    assert "is queued" in ctrf.json()["detail"]
    assert Client().post(f"/api/v1/runs/{run.pk}/cancel/").status_code == 401

    cancelled = schema_check(maintainer.post(f"/api/v1/runs/{run.pk}/cancel/"))
    assert cancelled.status_code == 200
    assert cancelled.json()["status"] == "cancelled"
    again = schema_check(maintainer.post(f"/api/v1/runs/{run.pk}/cancel/"))
    assert again.status_code == 409
    assert "already finished (cancelled)" in again.json()["detail"]
    assert "was cancelled" in Client().get(f"/api/v1/runs/{run.pk}/ctrf.json").json()["detail"]

    with django_capture_on_commit_callbacks(execute=False):
        done = runs.run_start(cluster=cluster_row(), recipe_name=RECIPE, phases=["deployment"])
    claim = runs.run_claim(run_id=done.pk)
    merged = '{\n  "results": {"x": "\\u003cb\\u003e →"}\n}\n'.encode()
    runs.run_finish(
        claim=claim,
        outcome=orchestrator.RunOutcome(
            status="passed",
            error="",
            snapshot_yaml="kind: Snapshot\n",
            phase_reports={"deployment": merged},
            merged_report=merged,
        ),
    )
    response = schema_check(Client().get(f"/api/v1/runs/{done.pk}/ctrf.json"))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.content == merged
    detail = Client().get(f"/api/v1/runs/{done.pk}/").json()
    assert detail["status"] == RunStatus.PASSED
    assert detail["ctrf_url"].endswith(f"/api/v1/runs/{done.pk}/ctrf.json")


def test_an_error_run_has_no_ctrf_and_says_why(
    real_catalog: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False):
        run = runs.run_start(cluster=cluster_row(), recipe_name=RECIPE)
    claim = runs.run_claim(run_id=run.pk)
    message = "readiness check failed: OS.release.VERSION_ID expected 24.04, got 22.04"
    runs.run_finish(
        claim=claim,
        outcome=orchestrator.RunOutcome(status="error", error=message, snapshot_yaml=None),
    )
    response = Client().get(f"/api/v1/runs/{run.pk}/ctrf.json")
    assert response.status_code == 404
    assert message in response.json()["detail"]
    assert Client().get("/api/v1/runs/999999/ctrf.json").status_code == 404
    assert Client().get("/api/v1/runs/999999/").status_code == 404
