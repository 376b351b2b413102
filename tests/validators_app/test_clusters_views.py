"""The cluster pages: who sees what, "Add cluster" with the service's refusals on the form,
"Test connection" over htmx against real loopback servers, no stored kubeconfig on any page,
and the add form keeping what was pasted after an error."""

from __future__ import annotations

import html
import re

import pytest
from django.test import Client, RequestFactory
from django.views.debug import ExceptionReporter

from evidence_app.models import Role
from evidence_app.services.tokens import user_with_role
from tests.validators_app.kubeconfigs import (
    SECRET_TOKEN,
    closed_port_url,
    https_kubeconfig,
    kubeconfig,
    serve_version,
)
from validators_app.models import Cluster
from validators_app.services.clusters import cluster_register

pytestmark = pytest.mark.django_db


def client_as(role: str | None) -> Client:
    client = Client()
    if role is not None:
        client.force_login(user_with_role(username=f"{role}-page-user", role=role))
    return client


def sim_cluster(name: str = "sim-page", server: str = "http://127.0.0.1:6443") -> Cluster:
    return cluster_register(
        name=name, kubeconfig_text=kubeconfig(server=server), environment="simulated"
    )


@pytest.mark.parametrize("role", [Role.MAINTAINER, Role.AUDITOR])
def test_maintainers_and_auditors_see_the_list_and_detail(role: str) -> None:
    cluster = sim_cluster()
    real = cluster_register(
        name="real-page",
        kubeconfig_text=https_kubeconfig("https://gpu.example.com"),
        environment="real",
    )
    client = client_as(role)
    listing = client.get("/clusters/").content.decode()
    assert "sim-page" in listing
    assert "real-page" in listing
    assert "SIMULATED" in listing
    assert "https://gpu.example.com" in listing
    detail = client.get(f"/clusters/{cluster.pk}/").content.decode()
    assert "This cluster is a test double" in detail
    assert "No validation runs yet." in detail
    assert "test double" not in client.get(f"/clusters/{real.pk}/").content.decode()


def test_the_add_and_test_buttons_are_for_maintainers_only() -> None:
    cluster = sim_cluster()
    maintainer = client_as(Role.MAINTAINER).get(f"/clusters/{cluster.pk}/").content.decode()
    auditor = client_as(Role.AUDITOR).get(f"/clusters/{cluster.pk}/").content.decode()
    assert "Test connection" in maintainer
    assert "Test connection" not in auditor
    assert "Add cluster" in client_as(Role.MAINTAINER).get("/clusters/").content.decode()
    assert "Add cluster" not in client_as(Role.AUDITOR).get("/clusters/").content.decode()


def test_anonymous_users_are_sent_to_sign_in_and_contributors_refused() -> None:
    cluster = sim_cluster()
    for url in ("/clusters/", f"/clusters/{cluster.pk}/", "/clusters/new/"):
        response = client_as(None).get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/")
        assert client_as(Role.CONTRIBUTOR).get(url).status_code == 403
    assert client_as(Role.AUDITOR).get("/clusters/new/").status_code == 403
    htmx = client_as(None).post(f"/clusters/{cluster.pk}/test/", HTTP_HX_REQUEST="true")
    assert htmx.status_code == 403  # an htmx request gets the refusal, not a login page
    assert client_as(Role.AUDITOR).post(f"/clusters/{cluster.pk}/test/").status_code == 403
    cluster.refresh_from_db()
    assert cluster.last_tested_at is None


def test_a_missing_cluster_is_a_404() -> None:
    assert client_as(Role.MAINTAINER).get("/clusters/424242/").status_code == 404
    assert client_as(Role.MAINTAINER).post("/clusters/424242/test/").status_code == 404


def test_a_maintainer_adds_a_cluster_through_the_form() -> None:
    response = client_as(Role.MAINTAINER).post(
        "/clusters/new/",
        {"name": "from-form", "environment": "simulated", "kubeconfig": kubeconfig()},
    )
    cluster = Cluster.objects.get(name="from-form")
    assert response.status_code == 302
    assert response["Location"] == f"/clusters/{cluster.pk}/"
    assert cluster.created_by.username == "maintainer-page-user"


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"environment": "real"}, "http:// is refused for a real cluster"),
        ({"kubeconfig": "a: &x 1\nb: *x"}, "anchors and aliases"),
        ({"kubeconfig": kubeconfig(user={"auth-provider": {"name": "oidc"}})}, "auth-provider"),
        ({"name": "../etc"}, "letters, digits"),
        ({"environment": "prod"}, "Select a valid choice"),
        ({"kubeconfig": "x" * 300_000}, "at most 262144 characters"),
    ],
)
def test_refusals_show_on_the_form_which_keeps_what_was_pasted(
    fields: dict[str, str], expected: str
) -> None:
    """The paste goes back to the person who sent it (an error's "line 2, column 1" must point
    at text that is there), in a response no cache may keep."""
    data = {"name": "bad", "environment": "simulated", "kubeconfig": kubeconfig()} | fields
    response = client_as(Role.MAINTAINER).post("/clusters/new/", data)
    page = response.content.decode()
    assert response.status_code == 400
    assert expected in page
    textarea = re.search(r'<textarea name="kubeconfig"[^>]*>\n(.*?)</textarea>', page, re.S)
    assert textarea is not None
    assert html.unescape(textarea.group(1)) == data["kubeconfig"]
    assert "no-store" in response["Cache-Control"]
    assert not Cluster.objects.exists()


def test_a_yaml_error_points_at_a_line_of_the_kept_text() -> None:
    pasted = "apiVersion: v1\nclusters: [\n"
    data = {"name": "bad", "environment": "simulated", "kubeconfig": pasted}
    response = client_as(Role.MAINTAINER).post("/clusters/new/", data)
    page = html.unescape(response.content.decode())
    assert response.status_code == 400
    assert re.search(r"line \d+, column \d+", page)
    assert f">\n{pasted}</textarea>" in page


def test_a_duplicate_name_is_refused_on_the_form() -> None:
    sim_cluster("taken")
    response = client_as(Role.MAINTAINER).post(
        "/clusters/new/", {"name": "taken", "environment": "simulated", "kubeconfig": kubeconfig()}
    )
    assert response.status_code == 400
    assert "a cluster named &#x27;taken&#x27; already exists" in response.content.decode()


def test_the_form_needs_its_csrf_token() -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user_with_role(username="m", role=Role.MAINTAINER))
    response = client.post(
        "/clusters/new/", {"name": "x", "environment": "simulated", "kubeconfig": kubeconfig()}
    )
    assert response.status_code == 403
    assert not Cluster.objects.exists()


def test_test_connection_over_htmx_swaps_in_the_result() -> None:
    client = client_as(Role.MAINTAINER)
    with serve_version() as url:
        cluster = sim_cluster(server=url)
        response = client.post(
            f"/clusters/{cluster.pk}/test/", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="connection"
        )
    fragment = response.content.decode()
    assert response.status_code == 200
    assert fragment.lstrip().startswith('<section id="connection"')
    assert "<html" not in fragment
    assert "OK" in fragment
    assert "v1.32.4" in fragment
    assert "connected; Kubernetes v1.32.4" in fragment
    assert SECRET_TOKEN not in fragment


def test_test_connection_without_javascript_redirects_to_the_page_showing_the_failure() -> None:
    client = client_as(Role.MAINTAINER)
    cluster = sim_cluster(server=closed_port_url())
    response = client.post(f"/clusters/{cluster.pk}/test/")
    assert response.status_code == 302
    page = client.get(response["Location"]).content.decode()
    assert "FAILED" in page
    assert "not reachable:" in page


def test_no_page_shows_the_kubeconfig_or_its_ciphertext() -> None:
    cluster = sim_cluster()
    client = client_as(Role.MAINTAINER)
    for url in ("/clusters/", f"/clusters/{cluster.pk}/", "/clusters/new/"):
        page = client.get(url).content.decode()
        assert SECRET_TOKEN not in page
        assert cluster.kubeconfig_encrypted not in page


def test_hostile_names_and_servers_are_escaped() -> None:
    cluster = cluster_register(
        name="x",
        kubeconfig_text=kubeconfig(server="http://127.0.0.1:1/<b>"),
        environment="simulated",
    )
    Cluster.objects.filter(pk=cluster.pk).update(
        last_tested_at="2026-01-01T00:00:00Z",
        last_test_ok=False,
        last_test_detail="<script>alert(1)</script>",
    )
    page = client_as(Role.MAINTAINER).get(f"/clusters/{cluster.pk}/").content.decode()
    assert "<script>alert(1)" not in page
    assert "&lt;script&gt;" in page
    assert "/&lt;b&gt;" in page


def test_a_crash_while_registering_keeps_the_kubeconfig_out_of_error_reports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Django's production error reports (mailed to ADMINS, or any handler using the reporter)
    show POST data and every frame's local variables: the kubeconfig is cleansed in all."""
    from validators_app import clusters_views, crypto

    def explode() -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(crypto, "_fernet", explode)
    request = RequestFactory().post(
        "/clusters/new/", {"name": "boom", "environment": "simulated", "kubeconfig": kubeconfig()}
    )
    request.user = user_with_role(username="m", role=Role.MAINTAINER)
    request.htmx = False  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError) as caught:
        clusters_views.cluster_new(request)
    reporter = ExceptionReporter(request, caught.type, caught.value, caught.tb, is_email=True)
    report = reporter.get_traceback_text()
    assert "disk full" in report
    assert "kubeconfig_encrypt" in report  # the frames are there, their secrets are not
    assert "********" in report
    assert SECRET_TOKEN not in report
    assert SECRET_TOKEN not in reporter.get_traceback_html()


def test_the_detail_lists_the_clusters_recent_runs_and_only_its_own() -> None:
    from tests.factories import RecipeFactory
    from validators_app.models import ValidationRun
    from validators_app.orchestrator import generate_run_id

    def run(on: Cluster, status: str) -> ValidationRun:
        return ValidationRun.objects.create(
            cluster=on,
            recipe=recipe,
            phases=["deployment"],
            status=status,
            aicr_run_id=generate_run_id(),
            aicr_version="dev",
        )

    cluster = sim_cluster("with-runs")
    other = sim_cluster("other")
    recipe = RecipeFactory()
    mine = [run(cluster, "passed"), run(cluster, "failed")]
    theirs = run(other, "error")
    page = client_as(Role.AUDITOR).get(f"/clusters/{cluster.pk}/").content.decode()
    for run in mine:
        assert f'href="/runs/{run.pk}/"' in page
    assert f'href="/runs/{theirs.pk}/"' not in page
    assert "No validation runs yet." not in page
