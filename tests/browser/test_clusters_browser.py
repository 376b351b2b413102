"""The cluster pages in a real browser: a maintainer adds a simulated cluster through the form
and tests its connection over htmx (POST with the CSRF header from <body>), under strict CSP.

Screenshots go to ``$EVIDENCE_SCREENSHOTS`` (default: the test's tmp_path) for review.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from django.contrib.auth.models import Group
from playwright.sync_api import expect

from evidence_app.models import Role
from tests.k8s_sim import SimulatedCluster
from validators_app.models import Cluster

pytestmark = pytest.mark.browser
PASSWORD = "pw-for-browser-tests-2"


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("EVIDENCE_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(autouse=True)
def cluster_keys(settings):  # type: ignore[no-untyped-def]
    settings.CLUSTER_KUBECONFIG_KEYS = [Fernet.generate_key().decode()]
    settings.CLUSTER_KUBECONFIG_LOCAL_KEY_FILE = None


def sign_in_maintainer(page, django_user_model, next_url: str) -> None:  # type: ignore[no-untyped-def]
    user = django_user_model.objects.create_user(username="maria", password=PASSWORD)
    user.groups.add(Group.objects.get_or_create(name=Role.MAINTAINER)[0])
    page.goto(f"/accounts/login/?next={next_url}")
    page.fill("#id_username", "maria")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    expect(page).to_have_url(re.compile(re.escape(next_url) + "$"))


def test_a_maintainer_adds_a_simulated_cluster_and_tests_it(  # type: ignore[no-untyped-def]
    page, django_user_model, console, shots
) -> None:
    sign_in_maintainer(page, django_user_model, "/clusters/new/")
    with SimulatedCluster("healthy-h100-eks") as simulated:
        # Refused first: an http:// server for a real cluster; the paste is kept to fix.
        page.fill("#id_name", "sim-browser")
        page.check("input[name=environment][value=real]")
        page.fill("#id_kubeconfig", simulated.kubeconfig)
        page.click("button:text('Check and add')")
        expect(page.locator(".field-error")).to_contain_text("http:// is refused for a real")
        expect(page.locator("#id_kubeconfig")).to_have_value(simulated.kubeconfig)
        page.screenshot(path=shots / "cluster-add-refused.png", full_page=True)

        page.check("input[name=environment][value=simulated]")
        page.click("button:text('Check and add')")

        cluster = Cluster.objects.get(name="sim-browser")
        expect(page).to_have_url(re.compile(rf"/clusters/{cluster.pk}/$"))
        expect(page.locator("h1 .badge--simulated")).to_have_text("SIMULATED")
        expect(page.locator("#connection")).to_contain_text("never tested")

        page.click("#connection button:text('Test connection')")
        expect(page.locator("#connection .conn--ok")).to_have_text("OK")
        expect(page.locator("#connection")).to_contain_text("v1.33.5-eks-113cf36")
        page.screenshot(path=shots / "cluster-tested.png", full_page=True)
        assert simulated.scenario.token not in page.content()

    page.goto("/clusters/")
    expect(page.locator("tr[data-cluster] .conn--ok")).to_have_count(1)
    assert console.csp_violations() == []
    # The refused form answered 400 (as it should); nothing else may have failed.
    errors = [m for m in console.messages if m.startswith(("error", "pageerror"))]
    assert errors == [
        "error: Failed to load resource: the server responded with a status of 400 (Bad Request)"
    ]


def test_the_cluster_pages_fit_a_phone_screen(open_page, django_user_model, shots) -> None:  # type: ignore[no-untyped-def]
    from tests.validators_app.kubeconfigs import kubeconfig
    from validators_app.services.clusters import cluster_register

    cluster = cluster_register(
        name="a-rather-long-cluster-name-for-a-phone-" + "x" * 40,
        kubeconfig_text=kubeconfig(server="http://127.0.0.1:6443/" + "very-long-path/" * 12),
        environment="simulated",
    )
    page = open_page(viewport={"width": 390, "height": 844}, device_scale_factor=2)
    sign_in_maintainer(page, django_user_model, "/clusters/")
    for url in ("/clusters/", f"/clusters/{cluster.pk}/", "/clusters/new/"):
        page.goto(url)
        overflow = page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0, f"{url} overflows a 390px screen by {overflow}px"
    page.goto(f"/clusters/{cluster.pk}/")
    page.screenshot(path=shots / "cluster-phone.png", full_page=True)
