"""The run page in a real browser: a maintainer starts a run from the recipe page ("Validate
on…"), and the run page follows it live over htmx (status, check rows, log tail) while a worker
thread runs the real orchestrator against the simulated cluster; when the run ends the page
reloads once and shows the logs, the CTRF link and no more polling. Strict CSP holds."""

from __future__ import annotations

import os
import re
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.contrib.auth.models import Group
from django.db import connection
from playwright.sync_api import expect

from evidence_app.models import Role
from tests.k8s_sim import SCENARIOS, SimulatedCluster
from tests.validators_app.runs_support import publish_nothing
from validators_app.models import ValidationRun
from validators_app.services import clusters, runs

pytestmark = pytest.mark.browser
PASSWORD = "pw-for-browser-tests-3"
RECIPE = "h100-eks-ubuntu-training-kubeflow"


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("EVIDENCE_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(autouse=True)
def queued_ids(settings: Any, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    settings.CLUSTER_KUBECONFIG_KEYS = [Fernet.generate_key().decode()]
    settings.CLUSTER_KUBECONFIG_LOCAL_KEY_FILE = None
    # The "worker" is a thread of this test: the web side only queues.
    queued: list[int] = []
    monkeypatch.setattr(runs, "_enqueue", queued.append)
    publish_nothing(monkeypatch)
    return queued


def sign_in_maintainer(page: Any, django_user_model: Any, next_url: str) -> None:
    user = django_user_model.objects.create_user(username="rita", password=PASSWORD)
    user.groups.add(Group.objects.get_or_create(name=Role.MAINTAINER)[0])
    page.goto(f"/accounts/login/?next={next_url}")
    page.fill("#id_username", "rita")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    expect(page).to_have_url(re.compile(re.escape(next_url) + "$"))


def execute_in_background(run_id: int) -> threading.Thread:
    def work() -> None:
        try:
            runs.run_execute(run_id=run_id)
        finally:
            connection.close()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


def test_a_run_started_from_the_recipe_page_updates_live(
    page: Any, django_user_model: Any, queued_ids: list[int], shots: Path
) -> None:
    # Slow enough to watch: each container takes at least 0.4 s of wall time.
    scenario = replace(SCENARIOS["healthy-h100-eks"], time_scale=0.01, min_container_wall_s=0.4)
    with SimulatedCluster(scenario) as sim:
        clusters.cluster_register(
            name="lab-sim", kubeconfig_text=sim.kubeconfig, environment="simulated"
        )
        sign_in_maintainer(page, django_user_model, f"/recipes/{RECIPE}/")
        form = page.locator("section.validate-on")
        expect(form).to_contain_text("Validate on")
        expect(form.locator("select[name=cluster]")).to_contain_text("lab-sim (SIMULATED)")
        form.locator("input[name=phases][value=conformance]").uncheck()
        form.locator("input[name=phases][value=performance]").uncheck()
        form.locator("button[type=submit]").click()

        expect(page).to_have_url(re.compile(r"/runs/\d+/$"))
        run = ValidationRun.objects.get()
        assert queued_ids == [run.pk]
        assert run.phases == ["deployment"]
        status = page.locator("[data-run-status]")
        expect(status).to_have_text("queued")
        expect(page.locator(".recipe-sub")).to_contain_text("SIMULATED")

        worker = execute_in_background(run.pk)
        expect(status).to_have_text("running", timeout=15_000)
        # A check finished while the run goes on: its row and the log tail appear live.
        expect(page.locator("tr[data-status=passed]").first).to_be_visible(timeout=15_000)
        page.screenshot(path=str(shots / "run-live.png"), full_page=True)
        expect(status).to_have_text("passed", timeout=30_000)
        worker.join(timeout=30)

    # The page reloaded once (HX-Refresh): logs, CTRF link, no polling element left.
    expect(page.locator("#logs-h")).to_be_visible()
    expect(page.locator(f'a[href="/api/v1/runs/{run.pk}/ctrf.json"]')).to_be_visible()
    assert page.locator("[hx-trigger]").count() == 0
    page.screenshot(path=str(shots / "run-finished.png"), full_page=True)
