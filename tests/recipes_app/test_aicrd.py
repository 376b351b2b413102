"""The aicrd drop-in (``/v1/recipe``, ``/v1/query``) against AICR's goldens and its OpenAPI spec."""

from __future__ import annotations

import itertools
import json
import uuid
from functools import cache
from typing import Any

import pytest
import yaml
from django.test import Client
from openapi_core import OpenAPI
from openapi_core.contrib.django import DjangoOpenAPIRequest, DjangoOpenAPIResponse

from tests.shared_data import AICR, GOLDEN

pytestmark = pytest.mark.usefixtures("real_catalog")

AICRD_HOST = "localhost:8080"  # server.yaml's server, so openapi-core can match the paths
PREFIX = "[INVALID_REQUEST] "

H100_EKS_TRAINING = {
    "service": "eks",
    "accelerator": "h100",
    "intent": "training",
    "os": "ubuntu",
    "platform": "kubeflow",
}
SUCCESS_QUERIES = [
    {"accelerator": "a100"},
    {"accelerator": "h100", "intent": "training", "service": "bcm"},
    {
        "accelerator": "gb200",
        "intent": "inference",
        "os": "ubuntu",
        "platform": "dynamo",
        "service": "eks",
    },
    H100_EKS_TRAINING,
    {"accelerator": "rtx-pro-6000", "intent": "inference", "service": "eks"},
]
ERROR_QUERIES = [
    {"platform": "dynamo"},
    {"os": "cos"},
    {"intent": "inference", "os": "cos"},
    {"service": "gke"},
    {"accelerator": "l40s", "service": "oke"},
]


@cache
def aicrd_spec() -> OpenAPI:
    return OpenAPI.from_file_path(str(AICR / "api/aicr/v1/server.yaml"))


@cache
def projections() -> list[dict[str, Any]]:
    return json.loads((GOLDEN / "generated/query-projections.json").read_text())


def golden(query: dict[str, str]) -> dict[str, Any]:
    return next(p for p in projections() if p["query"] == query)


def get(client: Client, path: str, params: dict[str, Any] | None = None, **headers: str):
    return client.get(path, params or {}, headers={"host": AICRD_HOST, **headers})


def post(client: Client, path: str, body: bytes | str, content_type: str, **headers: str):
    return client.post(
        path, body, content_type=content_type, headers={"host": AICRD_HOST, **headers}
    )


def assert_valid(response: Any) -> None:
    """The response is one server.yaml allows for this request (status, headers, body)."""
    aicrd_spec().validate_response(
        DjangoOpenAPIRequest(response.wsgi_request), DjangoOpenAPIResponse(response)
    )


def assert_error_shape(response: Any, status: int, code: str = "INVALID_REQUEST") -> dict:
    assert response.status_code == status, response.content[:500]
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["code"] == code
    assert body["retryable"] is False
    uuid.UUID(body["requestId"])
    assert body["timestamp"].endswith("Z")
    assert response["X-Request-Id"] == body["requestId"]
    return body


def component_versions(refs: list[dict[str, Any]]) -> dict[str, str | None]:
    return {ref["name"]: ref.get("version") or None for ref in refs}


# --- GET /v1/recipe -------------------------------------------------------------------------


@pytest.mark.parametrize("query", SUCCESS_QUERIES, ids=lambda q: ",".join(sorted(q.values())))
def test_it_resolves_golden_queries_like_aicr(client: Client, query: dict[str, str]) -> None:
    expected = golden(query)
    response = get(client, "/v1/recipe", query)

    assert response.status_code == 200, response.content[:500]
    doc = response.json()
    assert doc["kind"] == "RecipeResult"
    assert doc["apiVersion"] == expected["apiVersion"] == "aicr.run/v1alpha2"
    assert doc["metadata"]["appliedOverlays"] == expected["appliedOverlays"]
    assert doc["deploymentOrder"] == expected["deploymentOrder"]
    assert component_versions(doc["componentRefs"]) == component_versions(expected["components"])
    assert {c["name"]: c["value"] for c in doc.get("constraints", [])} == {
        c["name"]: c["value"] for c in expected["constraints"]
    }
    assert response["Cache-Control"] == "public, max-age=600"
    assert_valid(response)


@pytest.mark.parametrize("query", ERROR_QUERIES, ids=lambda q: ",".join(sorted(q.values())))
def test_it_gives_aicrs_error_for_golden_queries(client: Client, query: dict[str, str]) -> None:
    expected = golden(query)
    assert expected["outcome"] == "error"

    response = get(client, "/v1/recipe", query)

    body = assert_error_shape(response, 400)
    assert PREFIX + body["message"] == expected["error"]
    assert_valid(response)


def test_it_names_uncovered_dimensions_and_their_completions(client: Client) -> None:
    query = {"service": "eks", "accelerator": "h100", "intent": "training", "platform": "kubeflow"}
    expected = golden(query)

    body = assert_error_shape(get(client, "/v1/recipe", query), 400)

    assert PREFIX + body["message"] == expected["error"]
    assert body["details"]["uncovered"] == [
        {
            "dimension": "platform",
            "requestedValue": "kubeflow",
            "validCompletions": [{"os": "ubuntu"}],
        }
    ]


def test_it_says_when_an_os_is_required(client: Client) -> None:
    body = assert_error_shape(get(client, "/v1/recipe", {"service": "gke"}), 400)

    assert body["message"] == golden({"service": "gke"})["error"].removeprefix(PREFIX)
    assert body["details"]["requiresOS"] is True


def test_it_accepts_the_gpu_alias_and_echoes_nodes(client: Client) -> None:
    params = {"service": "eks", "gpu": "h100", "intent": "training", "nodes": "8"}
    response = get(client, "/v1/recipe", params)

    assert response.status_code == 200, response.content[:500]
    doc = response.json()
    assert doc["criteria"]["accelerator"] == "h100"
    assert doc["criteria"]["nodes"] == 8
    assert_valid(response)


def test_it_refuses_a_request_without_criteria(client: Client) -> None:
    body = assert_error_shape(get(client, "/v1/recipe", {"service": "any"}), 400)

    assert body["message"] == (
        "no criteria provided: specify at least one of service, accelerator, intent, os, "
        "platform, nodes"
    )


def test_it_refuses_an_unknown_value_naming_it(client: Client) -> None:
    response = get(client, "/v1/recipe", {"service": "windows"})

    body = assert_error_shape(response, 400)
    assert body["message"] == "Invalid recipe criteria"
    assert "invalid service type: windows" in body["details"]["error"]
    assert_valid(response)


def test_it_refuses_profiled_recipes_on_v1(client: Client) -> None:
    query = {"service": "aks", "accelerator": "h100", "intent": "training", "os": "ubuntu"}
    assert golden(query)["apiVersion"] == "aicr.run/v1alpha3"

    body = assert_error_shape(get(client, "/v1/recipe", query), 400)

    assert body["message"] == "Profiled recipes are available only on /v2/recipe"


def test_it_refuses_explicit_profile_selection_on_v1(client: Client) -> None:
    params = {**H100_EKS_TRAINING, "profile": "gpuStack=operator-managed"}
    body = assert_error_shape(get(client, "/v1/recipe", params), 400)

    assert body["details"]["error"] == (
        "[INVALID_REQUEST] profile selection is available only on /v2/recipe"
    )


def test_it_serves_slurm_recipes_in_the_legacy_shape(client: Client) -> None:
    query = {
        "service": "eks",
        "accelerator": "h100",
        "intent": "training",
        "os": "ubuntu",
        "platform": "slurm",
    }
    expected = golden(query)
    assert expected["apiVersion"] == "aicr.run/v1alpha3"

    response = get(client, "/v1/recipe", query)

    assert response.status_code == 200, response.content[:500]
    doc = response.json()
    assert doc["apiVersion"] == "aicr.run/v1alpha2"
    assert "configuration" not in doc
    assert doc["deploymentOrder"] == expected["deploymentOrder"]
    assert_valid(response)


def test_it_echoes_a_client_request_id_and_makes_one_otherwise(client: Client) -> None:
    mine = "550e8400-e29b-41d4-a716-446655440000"
    echoed = get(client, "/v1/recipe", H100_EKS_TRAINING, **{"X-Request-Id": mine})
    hostile = get(client, "/v1/recipe", {"service": "windows"}, **{"X-Request-Id": "<script>"})

    assert echoed["X-Request-Id"] == mine
    assert hostile.json()["requestId"] != "<script>"
    uuid.UUID(hostile["X-Request-Id"])


@pytest.mark.parametrize("method", ["put", "patch", "delete"])
def test_it_answers_other_methods_with_405(client: Client, method: str) -> None:
    response = getattr(client, method)("/v1/recipe", headers={"host": AICRD_HOST})

    body = assert_error_shape(response, 405, code="METHOD_NOT_ALLOWED")
    assert response["Allow"] == "GET, POST"
    assert body["details"] == {"method": method.upper(), "allowed": ["GET", "POST"]}


def test_it_answers_an_unexpected_failure_as_a_retryable_internal_error(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(**kwargs: Any) -> dict:
        raise RuntimeError("resolver exploded")

    monkeypatch.setattr("recipes_app.services.recipe_query", broken)

    response = get(client, "/v1/recipe", H100_EKS_TRAINING)

    assert response.status_code == 500
    body = response.json()
    assert (body["code"], body["message"], body["retryable"]) == (
        "INTERNAL",
        "Failed to build recipe",
        True,
    )
    assert "exploded" not in response.content.decode()
    assert_valid(response)


# --- POST /v1/recipe ------------------------------------------------------------------------


def test_it_resolves_a_json_recipe_criteria_body(client: Client) -> None:
    body = {
        "kind": "RecipeCriteria",
        "apiVersion": "aicr.run/v1alpha2",
        "metadata": {"name": "training-config"},
        "spec": H100_EKS_TRAINING,
    }
    response = post(client, "/v1/recipe", json.dumps(body), "application/json")

    assert response.status_code == 200, response.content[:500]
    assert (
        response.json()["metadata"]["appliedOverlays"]
        == golden(H100_EKS_TRAINING)["appliedOverlays"]
    )
    assert_valid(response)


@pytest.mark.parametrize("content_type", ["application/x-yaml", "application/yaml", "text/yaml"])
def test_it_resolves_a_yaml_recipe_criteria_body(client: Client, content_type: str) -> None:
    body = (
        "kind: RecipeCriteria\napiVersion: aicr.run/v1alpha2\nmetadata:\n  name: x\n"
        "spec:\n  service: eks\n  accelerator: gb200\n  intent: inference\n  os: ubuntu\n"
        "  platform: dynamo\n  nodes: 4\n"
    )
    response = post(client, "/v1/recipe", body, content_type)

    assert response.status_code == 200, response.content[:500]
    doc = response.json()
    expected = golden(
        {
            "accelerator": "gb200",
            "intent": "inference",
            "os": "ubuntu",
            "platform": "dynamo",
            "service": "eks",
        }
    )
    assert doc["deploymentOrder"] == expected["deploymentOrder"]
    assert doc["criteria"]["nodes"] == 4


def test_it_works_without_a_csrf_token() -> None:
    client = Client(enforce_csrf_checks=True)
    body = json.dumps({"kind": "RecipeCriteria", "spec": H100_EKS_TRAINING})

    response = post(client, "/v1/recipe", body, "application/json")

    assert response.status_code == 200


@pytest.mark.parametrize(
    ("body", "content_type", "error"),
    [
        (b"", "application/json", "request body is empty"),
        (b"{not json", "application/json", "failed to parse JSON body"),
        (b"[1, 2]", "application/json", "must be a RecipeCriteria mapping"),
        (
            b'{"kind": "Recipe", "spec": {"service": "eks"}}',
            "application/json",
            "invalid kind 'Recipe', expected 'RecipeCriteria'",
        ),
        (
            b'{"apiVersion": "aicr.nvidia.com/v1alpha1", "spec": {"service": "eks"}}',
            "application/json",
            "invalid apiVersion",
        ),
        (b'{"spec": {"service": ["eks"]}}', "application/json", "spec.service must be a string"),
        (b'{"spec": "eks"}', "application/json", "spec must be a mapping"),
        (
            b'{"spec": {"service": "eks"}, "profile": "gpuStack=x"}',
            "application/json",
            "profile selection is available only on /v2/recipe",
        ),
        (b"spec: [unclosed", "application/x-yaml", "failed to parse YAML body"),
        (
            b"spec: {service: eks}\n---\nspec: {}\n",
            "application/x-yaml",
            "failed to parse YAML body",
        ),
        (b"\xff\xfe\x00s\x00p\x00e\x00c", "application/json", "not valid UTF-8"),
        (b'{"spec": {"service": "windows"}}', "application/json", "invalid service type: windows"),
        (b'{"spec": {"nodes": -1, "service": "eks"}}', "application/json", "invalid nodes count"),
        (b"[" * 200_000 + b"]" * 200_000, "application/json", "nesting too deep"),
        (b"spec: " + b"[" * 200_000, "application/x-yaml", "failed to parse YAML body"),
        (b"spec: !!python/object:os.system {}", "application/x-yaml", "failed to parse YAML"),
    ],
)
def test_it_refuses_malformed_bodies_naming_the_problem(
    client: Client, body: bytes, content_type: str, error: str
) -> None:
    response = post(client, "/v1/recipe", body, content_type)

    answer = assert_error_shape(response, 400)
    assert answer["message"] == "Invalid recipe criteria"
    assert error in answer["details"]["error"]
    assert_valid(response)


def billion_laughs(levels: int = 9) -> str:
    names = "abcdefghij"
    lines = [f'{names[0]}: &{names[0]} ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for prev, name in itertools.pairwise(names[: levels + 1]):
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 8) + "]")
    return "\n".join(lines) + "\nspec: {service: eks}\n"


def test_it_refuses_a_yaml_bomb_at_its_first_alias(client: Client) -> None:
    response = post(client, "/v1/recipe", billion_laughs(), "application/x-yaml")

    answer = assert_error_shape(response, 400)
    assert "anchors and aliases are not allowed" in answer["details"]["error"]


@pytest.mark.parametrize("size", [1024 * 1024 + 1, 5 * 1024 * 1024])
def test_it_refuses_bodies_over_one_mebibyte(client: Client, size: int) -> None:
    body = b'{"spec": {"service": "eks"}, "pad": "' + b"a" * size + b'"}'

    response = post(client, "/v1/recipe", body, "application/json")

    answer = assert_error_shape(response, 413)  # aicrd: INVALID_REQUEST with HTTP 413
    assert answer["message"] == "Request body exceeds maximum allowed size"
    assert answer["details"] == {"limit_bytes": 1024 * 1024}


def test_it_keeps_hostile_values_out_of_html(client: Client) -> None:
    response = get(client, "/v1/recipe", {"service": "<script>alert(1)</script>"})

    assert_error_shape(response, 400)
    assert response["Content-Type"] == "application/json"
    assert response["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize("param", ["service", "gpu", "nodes"])
def test_it_cuts_huge_values_in_errors(client: Client, param: str) -> None:
    response = get(client, "/v1/recipe", {param: "9" * 100_000})

    body = assert_error_shape(response, 400)
    assert body["message"] == "Invalid recipe criteria"
    assert len(response.content) < 2_000


# --- /v1/query ------------------------------------------------------------------------------


def _component(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(ref for ref in doc["componentRefs"] if ref["name"] == name)


def test_it_selects_recipe_fields_by_dot_path(client: Client) -> None:
    recipe = get(client, "/v1/recipe", H100_EKS_TRAINING).json()

    order = get(client, "/v1/query", {**H100_EKS_TRAINING, "selector": "deploymentOrder"})
    service = get(client, "/v1/query", {**H100_EKS_TRAINING, "selector": ".criteria.service"})
    version = get(
        client, "/v1/query", {**H100_EKS_TRAINING, "selector": "components.gpu-operator.version"}
    )

    assert order.json() == recipe["deploymentOrder"]
    assert service.json() == "eks"
    assert version.json() == _component(recipe, "gpu-operator")["version"]
    for response in (order, service, version):
        assert response["Cache-Control"] == "public, max-age=600"
        assert_valid(response)


def test_it_hydrates_component_values_from_the_values_files(client: Client) -> None:
    recipe = get(client, "/v1/recipe", H100_EKS_TRAINING).json()
    ref = _component(recipe, "gpu-operator")
    base = yaml.safe_load((AICR / "recipes/components/gpu-operator/values.yaml").read_text())

    response = get(
        client, "/v1/query", {**H100_EKS_TRAINING, "selector": "components.gpu-operator"}
    )

    assert response.status_code == 200, response.content[:500]
    component = response.json()
    assert component["name"] == "gpu-operator"
    assert component["namespace"] == ref["namespace"]
    values = component["values"]
    # Keys of the base values file survive unless an override deleted them.
    assert set(base) - set(ref.get("overrides") or {}) <= set(values)
    for key, value in (ref.get("overrides") or {}).items():
        if not isinstance(value, dict) and value is not None:
            assert values[key] == value


def test_it_returns_the_whole_hydrated_recipe_for_an_empty_selector(client: Client) -> None:
    response = get(client, "/v1/query", {**H100_EKS_TRAINING, "selector": ""})

    assert response.status_code == 200
    hydrated = response.json()
    assert hydrated["kind"] == "RecipeResult"
    assert set(hydrated["deploymentOrder"]) <= set(hydrated["components"])
    assert hydrated["criteria"]["nodes"] == 0
    assert_valid(response)


def test_it_requires_a_selector_on_get(client: Client) -> None:
    response = get(client, "/v1/query", H100_EKS_TRAINING)

    body = assert_error_shape(response, 400)
    assert body["message"] == "Invalid query criteria"
    assert body["details"]["error"] == "[INVALID_REQUEST] selector is required on /v1/query"
    assert_valid(response)


def test_it_answers_404_for_a_selector_that_names_nothing(client: Client) -> None:
    selector = "components.gpu-operator.values.no-such-key"
    response = get(client, "/v1/query", {**H100_EKS_TRAINING, "selector": selector})

    body = assert_error_shape(response, 404, code="NOT_FOUND")
    assert body["message"] == "Selector path not found"
    assert body["details"]["selector"] == selector
    assert 'key "no-such-key" not found' in body["details"]["error"]
    assert_valid(response)


def test_it_gives_aicrs_error_on_query_too(client: Client) -> None:
    response = get(client, "/v1/query", {"platform": "dynamo", "selector": ""})

    body = assert_error_shape(response, 400)
    assert PREFIX + body["message"] == golden({"platform": "dynamo"})["error"]
    assert_valid(response)


@pytest.mark.parametrize("content_type", ["application/json", "application/x-yaml"])
def test_it_answers_a_posted_query_request(client: Client, content_type: str) -> None:
    request = {"criteria": H100_EKS_TRAINING, "selector": "metadata.appliedOverlays"}
    body = json.dumps(request) if "json" in content_type else yaml.safe_dump(request)

    response = post(client, "/v1/query", body, content_type)

    assert response.status_code == 200, response.content[:500]
    assert response.json() == golden(H100_EKS_TRAINING)["appliedOverlays"]
    assert_valid(response)


def test_it_returns_the_whole_recipe_when_a_posted_query_has_no_selector(client: Client) -> None:
    response = post(
        client, "/v1/query", json.dumps({"criteria": H100_EKS_TRAINING}), "application/json"
    )

    assert response.status_code == 200
    assert response.json()["kind"] == "RecipeResult"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('{"selector": "deploymentOrder"}', "Recipe criteria cannot be empty"),
        (
            '{"criteria": {"service": "windows"}, "selector": ""}',
            "Invalid criteria in request body",
        ),
        ('{"criteria": {}, "selector": ""}', "no criteria provided"),
        ("[]", "Invalid query request body"),
        ("", "Invalid query request body"),
    ],
)
def test_it_refuses_bad_posted_queries(client: Client, body: str, message: str) -> None:
    response = post(client, "/v1/query", body, "application/json")

    answer = assert_error_shape(response, 400)
    assert answer["message"].startswith(message)
    assert_valid(response)


def test_it_refuses_a_yaml_bomb_query(client: Client) -> None:
    response = post(client, "/v1/query", billion_laughs(), "application/x-yaml")

    answer = assert_error_shape(response, 400)
    assert "anchors and aliases are not allowed" in answer["details"]["error"]
