"""Register the simulated clusters (tests/k8s_sim) through the API and test their connection:
the real kubernetes client, the real HTTP server, the simulator's scenarios."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from rest_framework.test import APIClient

from evidence_app.models import Role
from evidence_app.services.tokens import token_create, user_with_role
from tests.k8s_sim import SCENARIOS, SimulatedCluster
from validators_app import crypto
from validators_app.models import Cluster
from validators_app.orchestrator.connection import INVALID_ANSWER, NOT_REACHABLE

pytestmark = pytest.mark.django_db
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"


@pytest.fixture
def maintainer() -> APIClient:
    api = APIClient()
    _, raw = token_create(
        user=user_with_role(username="m", role=Role.MAINTAINER), role=Role.MAINTAINER
    )
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return api


def register_and_test(api: APIClient, kubeconfig_text: str, name: str) -> dict[str, object]:
    created = api.post(
        "/api/v1/clusters/",
        data=json.dumps({"name": name, "kubeconfig": kubeconfig_text, "environment": "simulated"}),
        content_type="application/json",
    )
    assert created.status_code == 201, created.content
    response = api.post(f"/api/v1/clusters/{created.json()['id']}/test/")
    assert response.status_code == 200
    body = response.json()
    assert SCENARIOS["healthy-h100-eks"].token not in json.dumps(body)
    return body


def test_a_healthy_simulated_cluster_answers_its_kubernetes_version(maintainer: APIClient) -> None:
    with SimulatedCluster("healthy-h100-eks") as cluster:
        body = register_and_test(maintainer, cluster.kubeconfig, "sim-healthy")
        # The simulator logs a request after answering it: give its thread a moment.
        deadline = time.monotonic() + 5
        while ("GET", "/version") not in cluster.requests and time.monotonic() < deadline:
            time.sleep(0.01)
        version_requests = [request for request in cluster.requests if request[1] == "/version"]
    assert body == {
        "ok": True,
        "server_version": "v1.33.5-eks-113cf36",
        "detail": "connected; Kubernetes v1.33.5-eks-113cf36",
    }
    assert len(version_requests) == 1
    stored = Cluster.objects.get(name="sim-healthy")
    assert (stored.last_test_ok, stored.last_test_server_version) == (True, "v1.33.5-eks-113cf36")


def test_an_unreachable_simulated_cluster_says_so(maintainer: APIClient) -> None:
    with SimulatedCluster("unreachable") as cluster:
        body = register_and_test(maintainer, cluster.kubeconfig, "sim-unreachable")
    assert body["ok"] is False
    assert body["detail"] == NOT_REACHABLE


def test_an_api_answering_500s_is_an_invalid_answer_its_status_logged_not_shown(
    maintainer: APIClient, caplog: pytest.LogCaptureFixture
) -> None:
    """The user gets the reason class only (issue 19: what a port answered is not shown); the
    status is in the operators' log."""
    caplog.set_level(logging.INFO, logger="validators_app.orchestrator.connection")
    with SimulatedCluster("api-500s") as cluster:
        body = register_and_test(maintainer, cluster.kubeconfig, "sim-500s")
    assert body == {"ok": False, "server_version": "", "detail": INVALID_ANSWER}
    assert "HTTP 500 from /version" in caplog.text


def test_a_wrong_token_is_reported_as_refused_credentials(maintainer: APIClient) -> None:
    with SimulatedCluster("healthy-h100-eks") as cluster:
        document = yaml.safe_load(cluster.kubeconfig)
        document["users"][0]["user"]["token"] = "not-the-token"
        body = register_and_test(maintainer, yaml.safe_dump(document), "sim-bad-token")
    assert body == {
        "ok": False,
        "server_version": "",
        "detail": "HTTP 401: credentials were refused (unauthorized)",
    }


@pytest.mark.skipif(not Path(KUBECTL).exists(), reason="kubectl is not installed")
def test_the_stored_minimal_kubeconfig_works_for_kubectl_too(
    maintainer: APIClient, tmp_path: Path
) -> None:
    """What is stored (the checked, minimal kubeconfig) is a kubeconfig client-go accepts
    (over https with the embedded CA: client-go sends no bearer token over plain http)."""
    with SimulatedCluster("healthy-h100-eks", tls=True) as cluster:
        assert register_and_test(maintainer, cluster.kubeconfig, "sim-kubectl")["ok"] is True
        stored = Cluster.objects.get(name="sim-kubectl")
        path = tmp_path / "kubeconfig"
        path.write_text(crypto.kubeconfig_decrypt(stored.kubeconfig_encrypted))
        path.chmod(0o600)
        result = subprocess.run(
            [KUBECTL, "--kubeconfig", str(path), "version", "-o", "json", "--request-timeout=10s"],
            capture_output=True,
            text=True,
            timeout=60,
            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["serverVersion"]["gitVersion"] == "v1.33.5-eks-113cf36"
