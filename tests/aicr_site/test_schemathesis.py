"""schemathesis against the checked-in ``docs/openapi.yaml``, over the WSGI app in process.

Every operation gets a bounded number of generated requests (valid and invalid), sent in turn
as anonymous and with a contributor, auditor and maintainer token so guarded endpoints are
exercised past their 401/403; and every detail is asked for an object that exists, by each.
No answer may be a 500, and every answer must be one the document lists: its status code,
content type, headers and body schema.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from evidence_app.models import ExportChunk, ExportJob, ExportState
from evidence_app.services.tokens import token_create, user_with_role
from tests.aicr_site.api_objects import ApiObjects
from tests.shared_data import REPO_ROOT

ROLES = ("contributor", "auditor", "maintainer")
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
EXAMPLES = 8  # per operation, two per role in turn

schema = schemathesis.openapi.from_path(REPO_ROOT / "docs" / "openapi.yaml")
schema.app = get_wsgi_application()


@pytest.fixture(autouse=True)
def connection_kept() -> Iterator[None]:
    """As Django's test client does: the request signals must not close the test's connection
    (its transaction holds the test data)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def turn() -> Iterator[int]:
    """Which credentials the next generated request carries (round robin)."""
    return itertools.count()


@pytest.fixture
def headers(db: None, real_catalog: object) -> list[dict[str, str]]:
    """No credentials, then a token per role (created once per operation's test)."""
    tokens = [
        token_create(user=user_with_role(username=f"st-{role}", role=role), role=role)[1]
        for role in ROLES
    ]
    return [{}] + [{"Authorization": f"Bearer {token}"} for token in tokens]


@pytest.mark.django_db
@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_it_answers_generated_requests_as_the_document_says(
    case: Any, headers: list[dict[str, str]], turn: Iterator[int]
) -> None:
    case.call_and_validate(headers=headers[next(turn) % len(headers)], checks=CHECKS)


@pytest.fixture
def objects(api_objects: ApiObjects) -> dict[str, Any]:
    # An export is its owner's: the maintainer's token sees it, built (one stored chunk).
    body = b'{"id": 1}\n'
    export = ExportJob.objects.create(
        format="ndjson",
        site="http://localhost/",
        requested_by=user_with_role(username="st-maintainer", role="maintainer"),
        state=ExportState.DONE,
        total=1,
        done=1,
        filename="evidence-20261201T000000Z.ndjson",
        size=len(body),
        sha256=hashlib.sha256(body).hexdigest(),
    )
    ExportChunk.objects.create(job=export, seq=0, body=body)
    return {
        "id": {
            "evidence": api_objects.evidence.pk,
            "clusters": api_objects.cluster.pk,
            "runs": api_objects.run.pk,
            "releases": api_objects.release.pk,
            "exports": export.pk,
        },
        "slug": api_objects.evidence.signer.slug,
        "name": api_objects.recipe.name,
    }


def _existing(path: str, objects: dict[str, Any]) -> dict[str, Any]:
    parameters: dict[str, Any] = {}
    if "{id}" in path:
        parameters["id"] = objects["id"][path.split("/")[3]]
    if "{slug}" in path:
        parameters["slug"] = objects["slug"]
    if "{name}" in path:
        parameters["name"] = objects["name"]
    return parameters


DETAILS = [
    path
    for path, operations in schema.raw_schema["paths"].items()
    if "get" in operations and "{" in path and "/uploads/" not in path
]


@pytest.mark.django_db
@pytest.mark.parametrize("path", DETAILS)
def test_it_answers_for_objects_that_exist_as_the_document_says(
    path: str, objects: dict[str, Any], headers: list[dict[str, str]]
) -> None:
    operation = schema[path]["GET"]
    case = operation.Case(path_parameters=_existing(path, objects))
    statuses = []
    for credentials in headers:
        response = case.call_and_validate(headers=credentials, checks=CHECKS)
        statuses.append(response.status_code)
    assert 200 in statuses, statuses  # some role saw the object, so its body was checked
