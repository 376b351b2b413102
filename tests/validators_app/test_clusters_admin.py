"""The clusters admin: maintainers only, registration through the service with its errors on
the form, and the kubeconfig a write-only field (never on any admin page)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from evidence_app.models import Role
from evidence_app.services.tokens import user_with_role
from tests.validators_app.kubeconfigs import SECRET_TOKEN, kubeconfig
from validators_app import crypto
from validators_app.models import Cluster
from validators_app.services.clusters import cluster_register

pytestmark = pytest.mark.django_db
ADD = "/admin/validators_app/cluster/add/"


def test_a_maintainer_adds_a_cluster_and_the_kubeconfig_is_stored_encrypted(
    admin_client: Client,
) -> None:
    response = admin_client.post(
        ADD, {"name": "sim-admin", "environment": "simulated", "kubeconfig": kubeconfig()}
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    cluster = Cluster.objects.get(name="sim-admin")
    assert cluster.created_by.username == "admin"
    assert SECRET_TOKEN not in cluster.kubeconfig_encrypted
    assert SECRET_TOKEN in crypto.kubeconfig_decrypt(cluster.kubeconfig_encrypted)


def test_a_refused_kubeconfig_is_a_form_error_and_nothing_is_stored(admin_client: Client) -> None:
    response = admin_client.post(
        ADD,
        {
            "name": "bad",
            "environment": "real",
            "kubeconfig": kubeconfig(user={"exec": {"command": "sh"}}),
        },
    )
    assert response.status_code == 200
    assert "exec plugins are refused" in response.content.decode()
    assert not Cluster.objects.exists()


def test_no_admin_page_shows_the_kubeconfig(admin_client: Client) -> None:
    cluster = cluster_register(name="c", kubeconfig_text=kubeconfig(), environment="simulated")
    for url in (
        "/admin/validators_app/cluster/",
        f"/admin/validators_app/cluster/{cluster.pk}/change/",
        f"/admin/validators_app/cluster/{cluster.pk}/history/",
        f"/admin/validators_app/cluster/{cluster.pk}/delete/",
    ):
        page = admin_client.get(url)
        assert page.status_code == 200, url
        assert SECRET_TOKEN not in page.content.decode()
        assert cluster.kubeconfig_encrypted not in page.content.decode()


def test_renaming_keeps_the_kubeconfig_and_a_new_one_replaces_it(admin_client: Client) -> None:
    cluster = cluster_register(name="c", kubeconfig_text=kubeconfig(), environment="simulated")
    change = f"/admin/validators_app/cluster/{cluster.pk}/change/"
    before = cluster.kubeconfig_encrypted
    assert admin_client.post(change, {"name": "renamed", "new_kubeconfig": ""}).status_code == 302
    cluster.refresh_from_db()
    assert (cluster.name, cluster.kubeconfig_encrypted) == ("renamed", before)

    replacement = kubeconfig(server="http://127.0.0.1:7000", user={"token": "other-token"})
    assert (
        admin_client.post(change, {"name": "renamed", "new_kubeconfig": replacement}).status_code
        == 302
    )
    cluster.refresh_from_db()
    assert cluster.server == "http://127.0.0.1:7000"
    assert "other-token" in crypto.kubeconfig_decrypt(cluster.kubeconfig_encrypted)

    refused = admin_client.post(
        change, {"name": "renamed", "new_kubeconfig": kubeconfig(server="http://10.1.1.1")}
    )
    assert refused.status_code == 200
    assert "loopback" in refused.content.decode()
    cluster.refresh_from_db()
    assert cluster.server == "http://127.0.0.1:7000"


@pytest.mark.parametrize("role", [Role.CONTRIBUTOR, Role.AUDITOR])
def test_staff_who_are_not_maintainers_cannot_see_clusters(role: str) -> None:
    user = user_with_role(username="staff", role=role)
    user.is_staff = True
    user.save()
    user.user_permissions.add(*Permission.objects.filter(codename__endswith="_cluster"))
    client = Client()
    client.force_login(user)
    assert client.get("/admin/validators_app/cluster/").status_code == 403
    assert client.get(ADD).status_code == 403


def test_a_maintainer_with_the_model_permissions_may_add() -> None:
    user = user_with_role(username="m", role=Role.MAINTAINER)
    user.is_staff = True
    user.save()
    user.user_permissions.add(*Permission.objects.filter(codename__endswith="_cluster"))
    client = Client()
    client.force_login(user)
    assert client.get(ADD).status_code == 200


def test_a_cluster_with_runs_cannot_be_deleted_and_says_why(admin_client: Client) -> None:
    from tests.factories import RecipeFactory
    from validators_app.models import ValidationRun
    from validators_app.orchestrator import generate_run_id

    cluster = cluster_register(name="busy", kubeconfig_text=kubeconfig(), environment="simulated")
    ValidationRun.objects.create(
        cluster=cluster,
        recipe=RecipeFactory(),
        phases=["deployment"],
        status="passed",
        aicr_run_id=generate_run_id(),
        aicr_version="dev",
    )
    url = f"/admin/validators_app/cluster/{cluster.pk}/delete/"
    page = admin_client.get(url)
    refused = admin_client.post(url, {"post": "yes"})
    assert page.status_code == 200
    assert "would require deleting the following protected related objects" in page.content.decode()
    assert refused.status_code in (200, 403)
    assert Cluster.objects.filter(pk=cluster.pk).exists()
