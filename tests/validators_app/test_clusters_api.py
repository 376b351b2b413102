"""Clusters API: who may do what, 400s that name the problem, the kubeconfig never coming
back, and "test connection" against real loopback servers (ok, unreachable, hung, refused)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import yaml
from django.conf import settings
from django.db import connection
from django.test import Client
from openapi_core import OpenAPI
from openapi_core.contrib.django import DjangoOpenAPIRequest, DjangoOpenAPIResponse
from rest_framework.test import APIClient

from evidence_app.models import Role
from evidence_app.services.tokens import token_create, user_with_role
from tests.validators_app.kubeconfigs import (
    SECRET_TOKEN,
    VersionHandler,
    closed_port_url,
    https_kubeconfig,
    kubeconfig,
    serve_version,
    silent_server,
)
from validators_app.models import Cluster
from validators_app.orchestrator.connection import NOT_REACHABLE
from validators_app.services.clusters import cluster_register

pytestmark = pytest.mark.django_db
URL = "/api/v1/clusters/"


def client_for(role: str | None) -> APIClient:
    api = APIClient()
    if role is not None:
        user = user_with_role(username=f"{role}-user", role=role)
        _, raw = token_create(user=user, role=role)
        api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return api


def post(api: APIClient, body: Any) -> Any:
    return api.post(URL, data=json.dumps(body), content_type="application/json")


def registration(**overrides: Any) -> dict[str, Any]:
    return {"name": "sim-1", "kubeconfig": kubeconfig(), "environment": "simulated"} | overrides


def test_a_maintainer_registers_a_cluster_and_gets_exactly_the_documented_fields() -> None:
    response = post(client_for(Role.MAINTAINER), registration())
    assert response.status_code == 201, response.content
    body = response.json()
    assert set(body) == {"id", "name", "environment", "server"}
    assert body["name"] == "sim-1"
    assert body["environment"] == "simulated"
    assert body["server"] == "http://127.0.0.1:6443"
    assert response["Location"].endswith(f"/api/v1/clusters/{body['id']}/")
    cluster = Cluster.objects.get(pk=body["id"])
    assert cluster.created_by.username == "maintainer-user"
    assert cluster.auth_kind == "token"


@pytest.mark.parametrize(
    ("role", "expected"),
    [(None, 401), (Role.CONTRIBUTOR, 403), (Role.AUDITOR, 403)],
)
def test_only_maintainers_register(role: str | None, expected: int) -> None:
    response = post(client_for(role), registration())
    assert response.status_code == expected
    assert not Cluster.objects.exists()


@pytest.mark.parametrize(
    ("role", "expected"),
    [(None, 401), (Role.CONTRIBUTOR, 403), (Role.AUDITOR, 200), (Role.MAINTAINER, 200)],
)
def test_maintainers_and_auditors_read_clusters_nobody_else(
    role: str | None, expected: int
) -> None:
    cluster = cluster_register(name="c", kubeconfig_text=kubeconfig(), environment="simulated")
    api = client_for(role)
    assert api.get(URL).status_code == expected
    assert api.get(f"{URL}{cluster.pk}/").status_code == expected


def test_a_session_cookie_is_not_enough(client: Any, django_user_model: Any) -> None:
    user = user_with_role(username="m", role=Role.MAINTAINER)
    client.force_login(user)
    response = client.post(URL, data=json.dumps(registration()), content_type="application/json")
    assert response.status_code == 401


@pytest.mark.parametrize(
    ("body", "field", "expected"),
    [
        (registration(kubeconfig="a: [unclosed"), "kubeconfig", "malformed YAML"),
        (registration(environment="staging"), "environment", "environment"),
        (registration(environment="real"), "kubeconfig", "http:// is refused for a real cluster"),
        (registration(name="bad name!"), "name", "letters, digits"),
        (registration(name=""), "name", "name"),
        (
            registration(kubeconfig=kubeconfig(user={"exec": {"command": "sh"}})),
            "kubeconfig",
            "exec plugins are refused",
        ),
        (
            registration(kubeconfig=kubeconfig(user={"tokenFile": "/etc/passwd"})),
            "kubeconfig",
            "file paths are refused",
        ),
        (
            {"name": "x", "environment": "simulated"},
            "kubeconfig",
            "kubeconfig: This field is required",
        ),
        (registration(kubeconfig=12), "kubeconfig", "kubeconfig"),
    ],
)
def test_bad_input_is_a_400_naming_the_problem(body: Any, field: str, expected: str) -> None:
    response = post(client_for(Role.MAINTAINER), body)
    assert response.status_code == 400, response.content
    assert response.json()["field"] == field
    assert expected in response.json()["detail"]
    assert not Cluster.objects.exists()


@pytest.mark.parametrize(
    "raw",
    [b"[1, 2]", b"not json", b'"a string"', b"\xff\xfe", b"{" * 50 + b"}" * 50],
)
def test_bodies_that_are_not_a_json_object_are_400(raw: bytes) -> None:
    response = client_for(Role.MAINTAINER).post(URL, data=raw, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["detail"]


def test_a_huge_body_is_refused_before_it_is_parsed() -> None:
    body = json.dumps(registration(kubeconfig="#" + "x" * (10 * 1024 * 1024)))
    response = client_for(Role.MAINTAINER).post(URL, data=body, content_type="application/json")
    # The site-wide body cap refuses it before the view (or its kubeconfig limit) reads a byte.
    assert response.status_code == 413
    answer = response.json()
    assert answer["detail"] == "Request body exceeds maximum allowed size"
    assert answer["details"] == {"limit_bytes": settings.REQUEST_MAX_BODY_BYTES}


def test_a_body_under_the_site_cap_but_over_the_kubeconfig_limit_is_named() -> None:
    body = json.dumps(registration(kubeconfig="#" + "x" * (600 * 1024)))
    response = client_for(Role.MAINTAINER).post(URL, data=body, content_type="application/json")
    assert response.status_code == 413
    assert "byte limit (a kubeconfig may be at most" in response.json()["detail"]


def test_a_duplicate_name_is_a_400_on_the_name() -> None:
    api = client_for(Role.MAINTAINER)
    assert post(api, registration()).status_code == 201
    response = post(api, registration())
    assert response.status_code == 400
    assert response.json() == {
        "detail": "name: a cluster named 'sim-1' already exists",
        "field": "name",
    }


def test_the_kubeconfig_never_comes_back_from_any_endpoint() -> None:
    api = client_for(Role.MAINTAINER)
    created = post(api, registration())
    cluster_id = created.json()["id"]
    with serve_version() as url:
        cluster_register(
            name="live", kubeconfig_text=kubeconfig(server=url), environment="simulated"
        )
        live = Cluster.objects.get(name="live")
        responses = [
            created,
            api.get(URL),
            api.get(f"{URL}{cluster_id}/"),
            api.post(f"{URL}{live.pk}/test/"),
            api.get(f"{URL}{live.pk}/"),
            api.get("/api/schema/"),
        ]
    encrypted = Cluster.objects.get(pk=cluster_id).kubeconfig_encrypted
    for response in responses:
        assert response.status_code in (200, 201)
        text = response.content.decode()
        assert SECRET_TOKEN not in text
        assert encrypted not in text
        assert "kubeconfig_encrypted" not in text


def test_the_list_and_detail_show_where_a_cluster_points_and_its_last_test() -> None:
    cluster = cluster_register(
        name="real-1",
        kubeconfig_text=https_kubeconfig("https://gpu.example.com:6443"),
        environment="real",
    )
    api = client_for(Role.AUDITOR)
    row = api.get(URL).json()["results"][0]
    assert row["name"] == "real-1"
    assert row["server"] == "https://gpu.example.com:6443"
    assert row["context"] == "test"
    assert row["last_test"] is None
    detail = api.get(f"{URL}{cluster.pk}/").json()
    assert detail == row


def test_a_missing_cluster_is_a_404() -> None:
    api = client_for(Role.MAINTAINER)
    assert api.get(f"{URL}999999/").status_code == 404
    assert api.post(f"{URL}999999/test/").status_code == 404


# --- test connection ----------------------------------------------------------------------------


def test_test_connection_reports_the_server_version_and_records_it() -> None:
    api = client_for(Role.MAINTAINER)
    with serve_version() as url:
        cluster_id = post(api, registration(kubeconfig=kubeconfig(server=url))).json()["id"]
        response = api.post(f"{URL}{cluster_id}/test/")
    assert response.status_code == 200
    assert response.json() == {
        "ok": True,
        "server_version": "v1.32.4",
        "detail": "connected; Kubernetes v1.32.4",
    }
    assert VersionHandler.seen_authorization == [f"Bearer {SECRET_TOKEN}"]
    last = api.get(f"{URL}{cluster_id}/").json()["last_test"]
    assert (last["ok"], last["server_version"]) == (True, "v1.32.4")
    assert last["at"]


def test_test_connection_names_an_unreachable_server() -> None:
    api = client_for(Role.MAINTAINER)
    cluster_id = post(api, registration(kubeconfig=kubeconfig(server=closed_port_url()))).json()[
        "id"
    ]
    body = api.post(f"{URL}{cluster_id}/test/").json()
    assert body["ok"] is False
    assert body["server_version"] == ""
    assert body["detail"] == NOT_REACHABLE
    assert api.get(f"{URL}{cluster_id}/").json()["last_test"]["ok"] is False


def test_test_connection_gives_up_on_a_hung_server_after_its_timeout(
    settings: pytest.FixtureRequest,
) -> None:
    settings.CLUSTER_TEST_TIMEOUT_SECONDS = 1  # type: ignore[attr-defined]
    api = client_for(Role.MAINTAINER)
    with silent_server() as url:
        cluster_id = post(api, registration(kubeconfig=kubeconfig(server=url))).json()["id"]
        started = time.monotonic()
        body = api.post(f"{URL}{cluster_id}/test/").json()
        elapsed = time.monotonic() - started
    assert body["ok"] is False
    assert body["detail"] == NOT_REACHABLE
    assert elapsed < 10, f"a 1 s timeout took {elapsed:.1f} s"


@pytest.mark.parametrize("role", [None, Role.CONTRIBUTOR, Role.AUDITOR])
def test_only_maintainers_test_connections(role: str | None) -> None:
    cluster = cluster_register(name="c", kubeconfig_text=kubeconfig(), environment="simulated")
    assert client_for(role).post(f"{URL}{cluster.pk}/test/").status_code in (401, 403)
    cluster.refresh_from_db()
    assert cluster.last_tested_at is None


def test_a_kubeconfig_the_keys_cannot_open_fails_the_test_with_the_reason(
    settings: pytest.FixtureRequest,
) -> None:
    from cryptography.fernet import Fernet

    cluster = cluster_register(name="c", kubeconfig_text=kubeconfig(), environment="simulated")
    settings.CLUSTER_KUBECONFIG_KEYS = [Fernet.generate_key().decode()]  # type: ignore[attr-defined]
    body = client_for(Role.MAINTAINER).post(f"{URL}{cluster.pk}/test/").json()
    assert body["ok"] is False
    assert "cannot be decrypted" in body["detail"]


def test_the_raw_column_is_ciphertext_after_an_api_registration() -> None:
    response = post(client_for(Role.MAINTAINER), registration())
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT kubeconfig_encrypted FROM validators_app_cluster WHERE id = %s",
            [response.json()["id"]],
        )
        (stored,) = cursor.fetchone()
    assert SECRET_TOKEN not in stored
    assert stored.startswith("gAAAAA")


def test_every_answer_matches_the_openapi_document() -> None:
    schema = yaml.safe_load(Client().get("/api/schema/").content)
    spec = OpenAPI.from_dict({**schema, "servers": [{"url": "http://testserver"}]})
    api = client_for(Role.MAINTAINER)
    with serve_version() as url:
        created = post(api, registration(kubeconfig=kubeconfig(server=url)))
        cluster_id = created.json()["id"]
        responses = [
            created,
            post(api, registration(kubeconfig=kubeconfig(server=url))),  # 400: the name
            api.post(f"{URL}{cluster_id}/test/"),
            api.get(URL),
            api.get(f"{URL}{cluster_id}/"),
            api.get(f"{URL}999999/"),
            client_for(None).get(URL),
        ]
    assert [r.status_code for r in responses] == [201, 400, 200, 200, 200, 404, 401]
    for response in responses:
        spec.validate_response(
            DjangoOpenAPIRequest(response.wsgi_request), DjangoOpenAPIResponse(response)
        )


def test_a_real_cluster_over_mtls_tests_ok_and_a_wrong_ca_is_not_reachable(
    settings: pytest.FixtureRequest,
) -> None:
    from tests.validators_app.kubeconfigs import b64, client_certificate_user, pki

    # A real cluster is never on loopback unless the operator lists the network.
    settings.CLUSTER_ALLOWED_NETWORKS = ["127.0.0.1/32"]  # type: ignore[attr-defined]
    api = client_for(Role.MAINTAINER)
    with serve_version(tls=True) as url:
        good = post(
            api,
            registration(
                name="real-mtls",
                environment="real",
                kubeconfig=https_kubeconfig(url, user=client_certificate_user()),
            ),
        )
        wrong_ca = post(
            api,
            registration(
                name="real-wrong-ca",
                environment="real",
                kubeconfig=https_kubeconfig(
                    url,
                    user=client_certificate_user(),
                    cluster={"certificate-authority-data": b64(pki().client_cert_pem)},
                ),
            ),
        )
        assert (good.status_code, wrong_ca.status_code) == (201, 201)
        ok = api.post(f"{URL}{good.json()['id']}/test/").json()
        refused = api.post(f"{URL}{wrong_ca.json()['id']}/test/").json()
    assert ok == {
        "ok": True,
        "server_version": "v1.32.4",
        "detail": "connected; Kubernetes v1.32.4",
    }
    assert refused["ok"] is False
    assert refused["detail"] == NOT_REACHABLE  # as a closed port or a timeout would say
    assert "PRIVATE KEY" not in json.dumps([ok, refused])
