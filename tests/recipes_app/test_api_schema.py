"""The OpenAPI description of ``/api/v1/`` renders, is valid, and matches real responses."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from django.test import Client
from openapi_core import OpenAPI
from openapi_core.contrib.django import DjangoOpenAPIRequest, DjangoOpenAPIResponse
from openapi_spec_validator import validate

from recipes_app.models import Catalog

RECIPE_PATHS = (
    "/api/v1/recipes/",
    "/api/v1/recipes/{name}/",
    "/api/v1/recipes/{name}/resolved.yaml",
    "/api/v1/query/",
)
LEAF = "h100-eks-ubuntu-training-kubeflow"


@pytest.fixture
def schema(client: Client, db: None) -> dict[str, Any]:
    response = client.get("/api/schema/")
    assert response.status_code == 200
    return yaml.safe_load(response.content)


def test_it_serves_a_valid_openapi_document(schema: dict[str, Any]) -> None:
    validate(schema)

    assert schema["openapi"].startswith("3.")
    for path in RECIPE_PATHS:
        assert path in schema["paths"], path


def test_it_documents_the_list_filters_and_pagination(schema: dict[str, Any]) -> None:
    parameters = {p["name"] for p in schema["paths"]["/api/v1/recipes/"]["get"]["parameters"]}

    assert {"service", "accelerator", "os", "intent", "platform", "q", "catalog"} <= parameters
    assert {"page", "page_size"} <= parameters


def test_it_documents_the_query_parameters_and_errors(schema: dict[str, Any]) -> None:
    operation = schema["paths"]["/api/v1/query/"]["get"]
    parameters = {p["name"] for p in operation["parameters"]}

    assert {"service", "accelerator", "intent", "os", "platform", "profile"} <= parameters
    assert {"200", "400"} <= set(operation["responses"])


def test_it_documents_resolved_yaml_as_yaml(schema: dict[str, Any]) -> None:
    responses = schema["paths"]["/api/v1/recipes/{name}/resolved.yaml"]["get"]["responses"]

    assert "application/yaml" in responses["200"]["content"]
    assert "404" in responses


def test_it_renders_the_docs_page_without_a_cdn(client: Client, db: None) -> None:
    response = client.get("/api/docs/")

    assert response.status_code == 200
    html = response.content.decode()
    assert "swagger" in html.lower()
    assert "cdn." not in html
    assert "unpkg.com" not in html


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/api/v1/recipes/", {"service": "eks", "page_size": 5}),
        ("/api/v1/recipes/", {"service": "windows"}),
        (f"/api/v1/recipes/{LEAF}/", {}),
        ("/api/v1/recipes/no-such-recipe/", {}),
        ("/api/v1/query/", {"service": "eks", "accelerator": "h100", "intent": "training"}),
        ("/api/v1/query/", {"platform": "dynamo"}),
    ],
)
def test_it_describes_what_the_api_really_returns(
    client: Client, schema: dict[str, Any], real_catalog: Catalog, path: str, params: dict
) -> None:
    spec = OpenAPI.from_dict({**schema, "servers": [{"url": "http://testserver"}]})

    response = client.get(path, params)

    spec.validate_response(
        DjangoOpenAPIRequest(response.wsgi_request), DjangoOpenAPIResponse(response)
    )
