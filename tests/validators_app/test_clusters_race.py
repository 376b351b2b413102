"""Two maintainers registering the same name at the same moment: one cluster, one clear 400
(PostgreSQL: real concurrent transactions; the unique constraint decides)."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.db import connection
from rest_framework.test import APIClient

from evidence_app.models import Role
from evidence_app.services.tokens import token_create, user_with_role
from tests.validators_app.kubeconfigs import kubeconfig
from validators_app import crypto
from validators_app.models import Cluster

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_same_name_registered_twice_at_once_gives_one_cluster_and_one_400(
    monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: SQLite serialises writers, so two registrations cannot race")
    settings.CLUSTER_KUBECONFIG_KEYS = [Fernet.generate_key().decode()]
    barrier = threading.Barrier(2, timeout=30)
    encrypt = crypto.kubeconfig_encrypt

    def encrypt_together(text: str) -> str:
        barrier.wait()  # both passed the name check; now both insert
        return encrypt(text)

    monkeypatch.setattr(crypto, "kubeconfig_encrypt", encrypt_together)
    tokens = []
    for index in range(2):
        user = user_with_role(username=f"m{index}", role=Role.MAINTAINER)
        tokens.append(token_create(user=user, role=Role.MAINTAINER)[1])
    answers: list[tuple[int, dict[str, Any]]] = []
    errors: list[BaseException] = []

    def register(token: str) -> None:
        try:
            api = APIClient()
            api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
            body = {"name": "raced", "kubeconfig": kubeconfig(), "environment": "simulated"}
            response = api.post(
                "/api/v1/clusters/", data=json.dumps(body), content_type="application/json"
            )
            answers.append((response.status_code, response.json()))
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=register, args=(token,)) for token in tokens]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    assert sorted(code for code, _ in answers) == [201, 400]
    refused = next(body for code, body in answers if code == 400)
    assert refused == {"detail": "name: a cluster named 'raced' already exists", "field": "name"}
    assert Cluster.objects.filter(name="raced").count() == 1
