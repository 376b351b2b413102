"""A cluster's scheduling settings and check inputs: registered and changed through the API
(POST, PATCH) and the admin, refused with a 400 naming the field and nothing stored, the HF
token encrypted and never shown back, shown on the cluster page, and handed to the orchestrator
by ``spec_for`` (the token decrypted there only)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
import yaml
from django.test import Client
from django.utils import timezone
from openapi_core import OpenAPI
from openapi_core.contrib.django import DjangoOpenAPIRequest, DjangoOpenAPIResponse
from rest_framework.test import APIClient

from evidence_app.models import Role
from tests.validators_app.kubeconfigs import kubeconfig
from tests.validators_app.runs_support import RECIPE
from tests.validators_app.test_clusters_api import client_for
from validators_app import crypto
from validators_app.models import Cluster, ValidationRun
from validators_app.orchestrator import CheckInputs
from validators_app.services import runs
from validators_app.services.clusters import cluster_register, cluster_settings_update

pytestmark = pytest.mark.django_db
URL = "/api/v1/clusters/"
TOKEN = "hf_QwErTy0123456789SeCrEt"
TOLERATION = {
    "key": "nvidia.com/gpu",
    "operator": "Equal",
    "value": "present",
    "effect": "NoSchedule",
}
SETTINGS: dict[str, Any] = {
    "image_pull_secrets": ["regcred", "mirror.creds"],
    "node_selector": {"cloud.google.com/gke-nodepool": "gpu-pool", "team": ""},
    "tolerations": [TOLERATION],
    "agent_tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
    "hf_token": TOKEN,
    "nccl_fabric": "roce",
    "require_scoped_inference_gateway": True,
    "inference_perf_no_cleanup": True,
}


def post(api: APIClient, body: Any) -> Any:
    return api.post(URL, data=json.dumps(body), content_type="application/json")


def patch(api: APIClient, pk: int, body: Any) -> Any:
    return api.patch(f"{URL}{pk}/", data=json.dumps(body), content_type="application/json")


def registration(**settings: Any) -> dict[str, Any]:
    return {"name": "sim-1", "kubeconfig": kubeconfig(), "environment": "simulated", **settings}


def plain_cluster() -> Cluster:
    return cluster_register(name="c", kubeconfig_text=kubeconfig(), environment="simulated")


# --- registration and reading -----------------------------------------------------------------


def test_a_maintainer_registers_with_settings_and_reads_them_back_without_the_token() -> None:
    api = client_for(Role.MAINTAINER)
    created = post(api, registration(**SETTINGS))
    assert created.status_code == 201, created.content
    assert TOKEN not in created.content.decode()
    cluster = Cluster.objects.get(pk=created.json()["id"])
    assert TOKEN not in cluster.hf_token_encrypted
    assert crypto.secret_decrypt(cluster.hf_token_encrypted) == TOKEN
    detail = api.get(f"{URL}{cluster.pk}/")
    body = detail.json()
    assert TOKEN not in detail.content.decode()
    assert "hf_token" not in body
    assert body["hf_token_set"] is True
    assert body["image_pull_secrets"] == ["regcred", "mirror.creds"]
    assert body["node_selector"] == {"cloud.google.com/gke-nodepool": "gpu-pool", "team": ""}
    assert body["tolerations"] == [TOLERATION]
    assert body["agent_tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    assert (body["nccl_fabric"], body["require_scoped_inference_gateway"]) == ("roce", True)
    assert body["inference_perf_no_cleanup"] is True
    listing = api.get(URL)
    assert TOKEN not in listing.content.decode()
    assert cluster.hf_token_encrypted not in listing.content.decode()


def test_without_settings_a_cluster_has_aicrs_defaults() -> None:
    created = post(client_for(Role.MAINTAINER), registration())
    cluster = Cluster.objects.get(pk=created.json()["id"])
    assert cluster.image_pull_secrets == []
    assert cluster.node_selector == {}
    assert cluster.tolerations == []
    assert cluster.agent_tolerations is None  # tolerate every taint
    assert (cluster.hf_token_encrypted, cluster.nccl_fabric) == ("", "")
    assert not cluster.require_scoped_inference_gateway
    assert not cluster.inference_perf_no_cleanup


BAD = [
    ({"image_pull_secrets": "regcred"}, "image_pull_secrets", "must be a list of Secret names"),
    ({"image_pull_secrets": ["Reg_Cred"]}, "image_pull_secrets", "DNS-1123 subdomain"),
    ({"image_pull_secrets": ["a", "a"]}, "image_pull_secrets", "named more than once"),
    ({"node_selector": ["a=b"]}, "node_selector", "must be an object"),
    ({"node_selector": {"-bad": "x"}}, "node_selector", "label key '-bad'"),
    ({"node_selector": {"UPPER.example/x": "y"}}, "node_selector", "prefix must be a DNS-1123"),
    ({"node_selector": {"k": "a" * 64}}, "node_selector", "at most 63 characters"),
    ({"node_selector": {"k": "a,b"}}, "node_selector", "value of 'k'"),
    ({"node_selector": {"k": 1}}, "node_selector", "must be strings"),
    ({"tolerations": {"key": "a"}}, "tolerations", "must be a list"),
    ({"tolerations": ["a:NoSchedule"]}, "tolerations", "tolerations[0]: must be a toleration"),
    ({"tolerations": [{"key": "a", "operator": "In"}]}, "tolerations", "Exists or Equal"),
    ({"tolerations": [{"key": "a", "operator": 0}]}, "tolerations",
     "tolerations[0].operator: must be a string"),
    ({"tolerations": [{"key": "a", "effect": "NoRun"}]}, "tolerations", "NoSchedule, Pref"),
    ({"tolerations": [{"value": "x"}]}, "tolerations", "an empty key needs operator Exists"),
    ({"tolerations": [{"key": "a", "operator": "Exists", "value": "x"}]}, "tolerations",
     "must be empty when operator is Exists"),
    ({"tolerations": [{"key": "a", "tolerationSeconds": 5}]}, "tolerations",
     "only valid with effect NoExecute"),
    ({"tolerations": [{"key": "a", "effect": "NoExecute", "tolerationSeconds": "5"}]},
     "tolerations", "must be an integer"),
    ({"tolerations": [{"key": "a", "colour": "red"}]}, "tolerations", "unknown field 'colour'"),
    ({"agent_tolerations": [{"key": "", "operator": "Equal"}]}, "agent_tolerations",
     "agent_tolerations[0].key"),
    ({"nccl_fabric": "infiniband"}, "nccl_fabric", "'roce'"),
    ({"hf_token": "has space"}, "hf_token", "printable ASCII"),
    ({"hf_token": 12}, "hf_token", "must be a string"),
    ({"require_scoped_inference_gateway": "yes"}, "require_scoped_inference_gateway",
     "true or false"),
    ({"colour": "red"}, "colour", "not a cluster field"),
]  # fmt: skip


@pytest.mark.parametrize(("given", "field", "message"), BAD)
def test_a_bad_setting_at_registration_is_a_400_naming_it_and_nothing_is_stored(
    given: dict[str, Any], field: str, message: str
) -> None:
    response = post(client_for(Role.MAINTAINER), registration(**given))
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["field"] == field
    assert body["detail"].startswith(field)
    assert message in body["detail"]
    assert not Cluster.objects.exists()


def test_a_refused_token_is_not_echoed() -> None:
    response = post(client_for(Role.MAINTAINER), registration(hf_token="hf_secret with space"))
    assert response.status_code == 400
    assert "hf_secret" not in response.content.decode()


# --- PATCH -----------------------------------------------------------------------------------


def test_patch_changes_only_the_named_settings() -> None:
    cluster = cluster_register(
        name="c", kubeconfig_text=kubeconfig(), environment="simulated", settings=SETTINGS
    )
    api = client_for(Role.MAINTAINER)
    response = patch(api, cluster.pk, {"agent_tolerations": [], "node_selector": {}})
    assert response.status_code == 200, response.content
    assert response.json()["agent_tolerations"] == []
    cluster.refresh_from_db()
    assert (cluster.agent_tolerations, cluster.node_selector) == ([], {})
    assert cluster.image_pull_secrets == ["regcred", "mirror.creds"]
    assert crypto.secret_decrypt(cluster.hf_token_encrypted) == TOKEN
    back_to_default = patch(api, cluster.pk, {"agent_tolerations": None, "hf_token": ""})
    assert back_to_default.json()["agent_tolerations"] is None
    assert back_to_default.json()["hf_token_set"] is False
    cluster.refresh_from_db()
    assert (cluster.agent_tolerations, cluster.hf_token_encrypted) == (None, "")


def test_a_bad_patch_stores_none_of_its_settings() -> None:
    cluster = plain_cluster()
    response = patch(
        client_for(Role.MAINTAINER),
        cluster.pk,
        {"image_pull_secrets": ["good"], "tolerations": [{"key": "a", "operator": "Nope"}]},
    )
    assert response.status_code == 400
    assert response.json()["field"] == "tolerations"
    cluster.refresh_from_db()
    assert cluster.image_pull_secrets == []


@pytest.mark.parametrize("body", [{}, [], "x", {"name": "renamed"}, {"kubeconfig": "x"}])
def test_patch_takes_settings_only(body: Any) -> None:
    cluster = plain_cluster()
    response = patch(client_for(Role.MAINTAINER), cluster.pk, body)
    assert response.status_code == 400
    cluster.refresh_from_db()
    assert cluster.name == "c"


@pytest.mark.parametrize(("role", "expected"), [(None, 401), (Role.AUDITOR, 403)])
def test_only_maintainers_patch(role: str | None, expected: int) -> None:
    cluster = plain_cluster()
    response = patch(client_for(role), cluster.pk, {"nccl_fabric": "roce"})
    assert response.status_code == expected
    cluster.refresh_from_db()
    assert cluster.nccl_fabric == ""


def test_put_and_delete_are_not_offered() -> None:
    cluster = plain_cluster()
    api = client_for(Role.MAINTAINER)
    put = api.put(f"{URL}{cluster.pk}/", data="{}", content_type="application/json")
    assert put.status_code == 405
    assert api.delete(f"{URL}{cluster.pk}/").status_code == 405


def test_the_answers_match_the_openapi_document() -> None:
    schema = yaml.safe_load(Client().get("/api/schema/").content)
    spec = OpenAPI.from_dict({**schema, "servers": [{"url": "http://testserver"}]})
    api = client_for(Role.MAINTAINER)
    created = post(api, registration(**SETTINGS))
    pk = created.json()["id"]
    # A tested cluster: an untested one's ``last_test: null`` is refused by openapi-core's
    # reading of ``allOf`` + ``nullable`` (a separate matter from these settings).
    Cluster.objects.filter(pk=pk).update(
        last_test_ok=True, last_test_server_version="v1.33.5", last_tested_at=timezone.now()
    )
    for response in (
        created,
        api.get(f"{URL}{pk}/"),
        api.get(URL),
        patch(api, pk, {"agent_tolerations": None}),
        patch(api, pk, {"tolerations": "x"}),
    ):
        spec.validate_response(
            DjangoOpenAPIRequest(response.wsgi_request), DjangoOpenAPIResponse(response)
        )


# --- the run's input --------------------------------------------------------------------------


def test_spec_for_hands_the_settings_and_the_decrypted_token_to_the_orchestrator(
    real_catalog: Any,
) -> None:
    cluster = cluster_register(
        name="c", kubeconfig_text=kubeconfig(), environment="simulated", settings=SETTINGS
    )
    run = runs.run_start(cluster=cluster, recipe_name=RECIPE, phases=["deployment"])
    spec = runs.spec_for(ValidationRun.objects.get(pk=run.pk))
    assert spec.image_pull_secrets == ("regcred", "mirror.creds")
    assert spec.node_selector == {"cloud.google.com/gke-nodepool": "gpu-pool", "team": ""}
    assert spec.tolerations == (TOLERATION,)
    assert spec.agent_tolerations == ({"key": "nvidia.com/gpu", "operator": "Exists"},)
    assert spec.check_inputs == CheckInputs(
        hf_token=TOKEN,
        require_scoped_inference_gateway=True,
        nccl_fabric="roce",
        inference_perf_no_cleanup=True,
    )
    assert TOKEN not in repr(spec)
    cluster_settings_update(cluster=cluster, settings={"agent_tolerations": None})
    assert runs.spec_for(ValidationRun.objects.get(pk=run.pk)).agent_tolerations is None


def test_the_token_is_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG):
        cluster = plain_cluster()
        cluster_settings_update(cluster=cluster, settings={"hf_token": TOKEN})
    assert TOKEN not in caplog.text
    assert "hf_token_encrypted" in caplog.text  # the log says which setting changed


def test_key_rotation_re_encrypts_the_token(settings: Any, cluster_keys: list[str]) -> None:
    from cryptography.fernet import Fernet

    from validators_app.services.clusters import clusters_reencrypt

    cluster = cluster_register(
        name="c",
        kubeconfig_text=kubeconfig(),
        environment="simulated",
        settings={"hf_token": TOKEN},
    )
    settings.CLUSTER_KUBECONFIG_KEYS = [Fernet.generate_key().decode(), *cluster_keys]
    assert clusters_reencrypt() == 1
    settings.CLUSTER_KUBECONFIG_KEYS = settings.CLUSTER_KUBECONFIG_KEYS[:1]  # old key gone
    cluster.refresh_from_db()
    assert crypto.secret_decrypt(cluster.hf_token_encrypted) == TOKEN


# --- pages and the admin -----------------------------------------------------------------------


def test_the_cluster_page_shows_the_settings_and_only_whether_a_token_is_set(
    admin_client: Client,
) -> None:
    from evidence_app.services.tokens import user_with_role

    cluster = cluster_register(
        name="c", kubeconfig_text=kubeconfig(), environment="simulated", settings=SETTINGS
    )
    auditor = Client()
    auditor.force_login(user_with_role(username="aud", role=Role.AUDITOR))
    page = auditor.get(f"/clusters/{cluster.pk}/").content.decode()
    assert TOKEN not in page
    assert cluster.hf_token_encrypted not in page
    assert "HF token</dt><dd>set" in page
    assert "<code>regcred</code>, <code>mirror.creds</code>" in page
    assert "cloud.google.com/gke-nodepool=gpu-pool, team=" in page
    assert "<code>nvidia.com/gpu=present:NoSchedule</code>" in page
    assert "<code>nvidia.com/gpu op=Exists</code>" in page
    assert "Change these settings" not in page  # auditors read, maintainers change
    cluster_settings_update(cluster=cluster, settings={"hf_token": "", "agent_tolerations": None})
    page = auditor.get(f"/clusters/{cluster.pk}/").content.decode()
    assert "HF token</dt><dd>not set" in page
    assert "AICR's default: every taint" in page


def change_form(cluster: Cluster, **over: Any) -> dict[str, Any]:
    return {
        "name": cluster.name,
        "new_kubeconfig": "",
        "image_pull_secrets": json.dumps(cluster.image_pull_secrets),
        "node_selector": json.dumps(cluster.node_selector),
        "tolerations": json.dumps(cluster.tolerations),
        "agent_tolerations": "null"
        if cluster.agent_tolerations is None
        else json.dumps(cluster.agent_tolerations),
        "nccl_fabric": cluster.nccl_fabric,
        **over,
    }


def test_the_admin_changes_settings_through_the_service(admin_client: Client) -> None:
    cluster = plain_cluster()
    change = f"/admin/validators_app/cluster/{cluster.pk}/change/"
    form = admin_client.get(change).content.decode()
    assert 'name="hf_token"' in form
    response = admin_client.post(
        change,
        change_form(
            cluster,
            image_pull_secrets='["regcred"]',
            agent_tolerations="[]",
            hf_token=TOKEN,
            inference_perf_no_cleanup="on",
        ),
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    cluster.refresh_from_db()
    assert cluster.image_pull_secrets == ["regcred"]
    assert cluster.agent_tolerations == []
    assert cluster.inference_perf_no_cleanup is True
    assert crypto.secret_decrypt(cluster.hf_token_encrypted) == TOKEN
    page = admin_client.get(change).content.decode()
    assert TOKEN not in page
    assert cluster.hf_token_encrypted not in page
    # An empty token field keeps the stored token; "clear" removes it.
    admin_client.post(change, change_form(cluster))
    cluster.refresh_from_db()
    assert crypto.secret_decrypt(cluster.hf_token_encrypted) == TOKEN
    admin_client.post(change, change_form(cluster, clear_hf_token="on"))
    cluster.refresh_from_db()
    assert cluster.hf_token_encrypted == ""


def test_a_refused_admin_setting_is_a_form_error_and_nothing_changes(admin_client: Client) -> None:
    cluster = plain_cluster()
    change = f"/admin/validators_app/cluster/{cluster.pk}/change/"
    response = admin_client.post(
        change,
        change_form(cluster, name="renamed", node_selector='{"bad key": "x"}', hf_token=TOKEN),
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert "node_selector: label key &#x27;bad key&#x27;" in page
    assert TOKEN not in page
    cluster.refresh_from_db()
    assert (cluster.name, cluster.node_selector, cluster.hf_token_encrypted) == ("c", {}, "")
    not_json = admin_client.post(change, change_form(cluster, tolerations="[{"))
    assert not_json.status_code == 200
    assert "JSON: not valid JSON (" in not_json.content.decode()
    deep = admin_client.post(change, change_form(cluster, tolerations="[" * 20_000 + "]" * 20_000))
    assert deep.status_code == 200  # the bounded loader refuses it, re-shown without parsing
    assert "JSON: nesting deeper than 2 levels" in deep.content.decode()


def test_the_admin_adds_a_cluster_with_settings(admin_client: Client) -> None:
    response = admin_client.post(
        "/admin/validators_app/cluster/add/",
        {
            "name": "sim-admin",
            "environment": "simulated",
            "kubeconfig": kubeconfig(),
            "tolerations": json.dumps([TOLERATION]),
            "agent_tolerations": "",
            "nccl_fabric": "",
        },
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    cluster = Cluster.objects.get(name="sim-admin")
    assert cluster.tolerations == [TOLERATION]
    assert cluster.agent_tolerations is None


# --- the settings page -------------------------------------------------------------------------


def signed_in(role: str) -> Client:
    from evidence_app.services.tokens import user_with_role

    browser = Client()
    browser.force_login(user_with_role(username=f"{role}-page", role=role))
    return browser


def test_a_maintainer_changes_settings_on_the_page(real_catalog: Any) -> None:
    cluster = cluster_register(
        name="c", kubeconfig_text=kubeconfig(), environment="simulated", settings=SETTINGS
    )
    browser = signed_in(Role.MAINTAINER)
    url = f"/clusters/{cluster.pk}/settings/"
    assert f'href="{url}"' in browser.get(f"/clusters/{cluster.pk}/").content.decode()
    form = browser.get(url)
    assert form.status_code == 200
    page = form.content.decode()
    assert TOKEN not in page
    assert cluster.hf_token_encrypted not in page
    assert "mirror.creds" in page  # the stored values are the form's initial values
    response = browser.post(
        url,
        {
            "image_pull_secrets": '["regcred"]',
            "node_selector": "{}",
            "tolerations": "[]",
            "agent_tolerations": "null",
            "nccl_fabric": "",
        },
    )
    assert response.status_code == 302
    assert response["Location"] == f"/clusters/{cluster.pk}/"
    cluster.refresh_from_db()
    assert cluster.image_pull_secrets == ["regcred"]
    assert (cluster.node_selector, cluster.tolerations, cluster.agent_tolerations) == ({}, [], None)
    assert (cluster.nccl_fabric, cluster.require_scoped_inference_gateway) == ("", False)
    assert crypto.secret_decrypt(cluster.hf_token_encrypted) == TOKEN  # kept: not typed in


def test_a_refused_setting_on_the_page_is_a_400_on_its_field_and_nothing_changes() -> None:
    cluster = plain_cluster()
    url = f"/clusters/{cluster.pk}/settings/"
    response = signed_in(Role.MAINTAINER).post(
        url,
        {
            "image_pull_secrets": '["regcred"]',
            "tolerations": '[{"key": "a", "operator": "Exists", "value": "x"}]',
            "hf_token": TOKEN,
        },
    )
    assert response.status_code == 400
    page = response.content.decode()
    assert "tolerations[0].value: must be empty when operator is Exists" in page
    assert TOKEN not in page  # the typed token is not sent back either
    cluster.refresh_from_db()
    assert (cluster.image_pull_secrets, cluster.hf_token_encrypted) == ([], "")


@pytest.mark.parametrize("role", [Role.AUDITOR, Role.CONTRIBUTOR])
def test_only_maintainers_reach_the_settings_page(role: str) -> None:
    cluster = plain_cluster()
    browser = signed_in(role)
    url = f"/clusters/{cluster.pk}/settings/"
    assert browser.get(url).status_code == 403
    assert browser.post(url, {"nccl_fabric": "roce"}).status_code == 403
    cluster.refresh_from_db()
    assert cluster.nccl_fabric == ""
    assert Client().get(url).status_code == 302  # anonymous: sign in first
