"""``/api/v1/recipes/`` (list, detail, resolved.yaml) and ``/api/v1/query/``."""

from __future__ import annotations

import hashlib
import json
from functools import cache
from typing import Any

import pytest
from django.test import Client

from recipes_app.models import Catalog, Recipe
from tests.factories import CatalogFactory, RecipeFactory
from tests.shared_data import GOLDEN

LEAF = "h100-eks-ubuntu-training-kubeflow"
EVIDENCE = GOLDEN / "generated/evidence-example-full/summary-bundle"


@cache
def projections() -> list[dict[str, Any]]:
    return json.loads((GOLDEN / "generated/query-projections.json").read_text())


def golden(query: dict[str, str]) -> dict[str, Any]:
    return next(p for p in projections() if p["query"] == query)


# --- list -----------------------------------------------------------------------------------


def test_it_lists_the_current_catalogs_recipes(client: Client, real_catalog: Catalog) -> None:
    response = client.get("/api/v1/recipes/")

    assert response.status_code == 200
    body = response.json()
    assert body["count"] == Recipe.objects.filter(catalog=real_catalog).count()
    row = next(r for r in body["results"] if r["name"] == LEAF)
    recipe = Recipe.objects.get(catalog=real_catalog, name=LEAF)
    assert row == {
        "name": LEAF,
        "leaf": LEAF,
        "profile": "",
        "criteria": {
            "service": "eks",
            "accelerator": "h100",
            "os": "ubuntu",
            "intent": "training",
            "platform": "kubeflow",
        },
        "coordinate": recipe.coordinate,
        "digest": recipe.digest,
        "digest_v3": recipe.digest_v3,
        "component_count": recipe.component_count,
        "check_count": recipe.check_count,
        "change": recipe.change,
        "consensus": "UNTESTED",
        "consensus_includes_demo": False,
        "consensus_stale": {
            "stale": False,
            "counted_runs": 0,
            "stale_runs": 0,
            "reasons": {},
            "summary": "",
        },
        "url": f"http://testserver/api/v1/recipes/{LEAF}/",
        "html_url": f"http://testserver/recipes/{LEAF}/",
    }


@pytest.mark.parametrize(
    "params",
    [
        {"service": "eks"},
        {"accelerator": "h100", "intent": "training"},
        {"os": "cos"},
        {"platform": "kubeflow", "service": "gke"},
    ],
)
def test_it_filters_by_criteria(client: Client, real_catalog: Catalog, params: dict) -> None:
    response = client.get("/api/v1/recipes/", params)

    assert response.status_code == 200
    results = response.json()["results"]
    assert results
    assert all(row["criteria"][key] == value for row in results for key, value in params.items())
    assert response.json()["count"] == Recipe.objects.filter(catalog=real_catalog, **params).count()


def test_it_renders_the_browsable_api_for_people(client: Client, real_catalog: Catalog) -> None:
    response = client.get("/api/v1/recipes/", {"service": "eks"}, headers={"accept": "text/html"})

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    assert LEAF in response.content.decode()


def test_it_searches_free_text(client: Client, real_catalog: Catalog) -> None:
    response = client.get("/api/v1/recipes/", {"q": "kubeflow h100"})

    names = [row["name"] for row in response.json()["results"]]
    assert LEAF in names
    assert all("kubeflow" in name or "h100" in name for name in names)


def test_it_lists_an_older_catalog_version_on_request(
    client: Client, real_catalog: Catalog
) -> None:
    newer = CatalogFactory()
    RecipeFactory.create_batch(3, catalog=newer)

    current = client.get("/api/v1/recipes/").json()
    older = client.get("/api/v1/recipes/", {"catalog": real_catalog.pk}).json()

    assert current["count"] == 3
    assert older["count"] == Recipe.objects.filter(catalog=real_catalog).count()


def test_it_paginates_and_caps_the_page_size(client: Client, db: None) -> None:
    catalog = CatalogFactory()
    RecipeFactory.create_batch(205, catalog=catalog)

    default = client.get("/api/v1/recipes/", {"catalog": catalog.pk}).json()
    small = client.get("/api/v1/recipes/", {"catalog": catalog.pk, "page_size": 5, "page": 2})
    capped = client.get("/api/v1/recipes/", {"catalog": catalog.pk, "page_size": 1000}).json()

    assert default["count"] == 205
    assert len(default["results"]) == 50
    assert len(small.json()["results"]) == 5
    assert "page=3" in small.json()["next"]
    assert len(capped["results"]) == 200


@pytest.mark.parametrize(
    ("params", "field", "value"),
    [
        ({"service": "windows"}, "service", "windows"),
        ({"accelerator": "h100", "os": "plan9"}, "os", "plan9"),
        ({"catalog": "999999"}, "catalog", "999999"),
        ({"q": "x" * 500}, "q", "x" * 200 + "…"),
    ],
)
def test_it_refuses_unknown_filter_values_naming_them(
    client: Client, real_catalog: Catalog, params: dict, field: str, value: str
) -> None:
    response = client.get("/api/v1/recipes/", params)

    assert response.status_code == 400
    body = response.json()
    assert body["detail"] == "Unknown filter value."
    assert {"field": field, "value": value} == {
        key: body["errors"][0][key] for key in ("field", "value")
    }


def test_it_returns_hostile_values_as_json_only(client: Client, real_catalog: Catalog) -> None:
    response = client.get("/api/v1/recipes/", {"service": "<script>alert(1)</script>"})

    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response.json()["errors"][0]["value"] == "<script>alert(1)</script>"


def test_it_cuts_huge_filter_values(client: Client, real_catalog: Catalog) -> None:
    response = client.get("/api/v1/recipes/", {"service": "a" * 100_000})

    assert response.status_code == 400
    assert len(response.content) < 2_000


def test_it_pins_links_to_a_recipe_of_an_earlier_catalog_version(client: Client, db: None) -> None:
    """Without ``?catalog=`` a link to an earlier version's recipe would name the current
    version's recipe of the same name (another digest, other YAML)."""
    older = CatalogFactory()
    newer = CatalogFactory()
    RecipeFactory(catalog=older, name="r-pinned")
    RecipeFactory(catalog=newer, name="r-pinned")
    assert Catalog.objects.current() == newer
    api = "http://testserver/api/v1/recipes/r-pinned/"
    page = "http://testserver/recipes/r-pinned/"
    pin = f"?catalog={older.pk}"

    row = client.get("/api/v1/recipes/", {"catalog": older.pk}).json()["results"][0]
    body = client.get("/api/v1/recipes/r-pinned/", {"catalog": older.pk}).json()

    assert (row["url"], row["html_url"]) == (api + pin, page + pin)
    assert (body["url"], body["html_url"]) == (api + pin, page + pin)
    assert body["resolved_yaml_url"] == api + "resolved.yaml" + pin
    assert body["catalog"]["id"] == older.pk
    # The current version's links stay short, whether or not ?catalog= names it.
    for params in ({}, {"catalog": newer.pk}):
        row = client.get("/api/v1/recipes/", params).json()["results"][0]
        body = client.get("/api/v1/recipes/r-pinned/", params).json()
        assert (row["url"], row["html_url"]) == (api, page)
        assert (body["url"], body["html_url"]) == (api, page)
        assert body["resolved_yaml_url"] == api + "resolved.yaml"


@pytest.mark.parametrize("page_size", [5, 50])
def test_it_lists_in_a_constant_number_of_queries(
    client: Client, db: None, django_assert_num_queries: Any, page_size: int
) -> None:
    catalog = CatalogFactory()
    RecipeFactory.create_batch(60, catalog=catalog)

    # current catalog, facet rows, evidence generation (consensus badges), count, page:
    # whatever the page size.
    with django_assert_num_queries(5):
        response = client.get("/api/v1/recipes/", {"page_size": page_size, "service": "eks"})

    assert len(response.json()["results"]) == page_size


# --- detail ---------------------------------------------------------------------------------


def test_it_shows_one_recipe_in_full(client: Client, real_catalog: Catalog) -> None:
    recipe = Recipe.objects.get(catalog=real_catalog, name=LEAF)
    expected = golden(
        {
            "service": "eks",
            "accelerator": "h100",
            "intent": "training",
            "os": "ubuntu",
            "platform": "kubeflow",
        }
    )

    response = client.get(f"/api/v1/recipes/{LEAF}/")

    assert response.status_code == 200
    body = response.json()
    assert body["apiVersion"] == "aicr.run/v1alpha2"
    assert body["appliedOverlays"] == expected["appliedOverlays"]
    assert body["deploymentOrder"] == expected["deploymentOrder"]
    assert {c["name"]: c.get("version") or None for c in body["components"]} == {
        c["name"]: c.get("version") or None for c in expected["components"]
    }
    assert body["constraints"] == recipe.constraints
    assert set(body["checks"]) <= {"readiness", "deployment", "conformance", "performance"}
    assert body["check_count"] == sum(len(checks) for checks in body["checks"].values())
    assert body["digest"] == recipe.digest
    assert body["digest_v3"] == recipe.digest_v3 != recipe.digest
    assert body["parity_digest"] == recipe.parity_digest
    assert body["catalog"]["id"] == real_catalog.pk
    assert body["catalog"]["aicr_version"] == "dev"
    assert body["catalog"]["content_digest"] == real_catalog.content_digest
    assert body["aicr_command"] == (
        "aicr recipe --service eks --accelerator h100 --os ubuntu --intent training "
        "--platform kubeflow"
    )
    assert body["resolved_yaml_url"].endswith(f"/api/v1/recipes/{LEAF}/resolved.yaml")
    assert "evidence" not in body


def test_it_gives_the_profile_in_the_command_of_a_variant(
    client: Client, real_catalog: Catalog
) -> None:
    variant = Recipe.objects.filter(catalog=real_catalog).exclude(profile="").first()
    assert variant is not None

    body = client.get(f"/api/v1/recipes/{variant.name}/").json()

    assert body["profile"] == variant.profile
    assert body["aicr_command"].endswith(f"--profile {variant.profile}")
    assert "--service " + variant.service in body["aicr_command"]


def test_it_omits_wildcard_dimensions_from_the_command(client: Client, db: None) -> None:
    recipe = RecipeFactory(name="h100-any", os="any", intent="any", platform="any")

    body = client.get(f"/api/v1/recipes/{recipe.name}/", {"catalog": recipe.catalog_id}).json()

    assert body["aicr_command"] == "aicr recipe --service eks --accelerator h100"


@pytest.mark.parametrize(
    "name", ["no-such-recipe", "H100-EKS", "%3Cscript%3E", "a%20b", "x" * 300, "h100_eks"]
)
def test_it_answers_404_json_for_unknown_or_malformed_names(
    client: Client, real_catalog: Catalog, name: str
) -> None:
    for path in (f"/api/v1/recipes/{name}/", f"/api/v1/recipes/{name}/resolved.yaml"):
        response = client.get(path)

        assert response.status_code == 404, path
        assert response["Content-Type"] == "application/json"
        assert "<" not in response.json()["detail"]


def test_it_names_the_unknown_recipe(client: Client, real_catalog: Catalog) -> None:
    response = client.get("/api/v1/recipes/no-such-recipe/")

    assert "'no-such-recipe'" in response.json()["detail"]


# --- resolved.yaml --------------------------------------------------------------------------


def test_it_serves_the_canonical_yaml_whose_sha256_is_the_digest(
    client: Client, real_catalog: Catalog
) -> None:
    recipe = Recipe.objects.get(catalog=real_catalog, name=LEAF)

    response = client.get(f"/api/v1/recipes/{LEAF}/resolved.yaml")

    assert response.status_code == 200
    assert response["Content-Type"] == "application/yaml; charset=utf-8"
    digest = hashlib.sha256(response.content).hexdigest()
    assert digest == recipe.digest
    assert response["ETag"] == f'"sha256:{digest}"'
    assert response["X-Recipe-Digest"] == digest


def test_it_matches_the_digest_aicr_signed_in_the_evidence_bundle(
    client: Client, real_catalog: Catalog
) -> None:
    statement = json.loads((EVIDENCE / "statement.intoto.json").read_text())
    subject = statement["subject"][0]
    assert subject["name"] == f"recipe:{LEAF}"

    response = client.get(f"/api/v1/recipes/{LEAF}/resolved.yaml")

    assert hashlib.sha256(response.content).hexdigest() == subject["digest"]["sha256"]
    assert response.content == (EVIDENCE / "recipe.yaml").read_bytes()


def test_it_serves_yaml_whatever_the_accept_header(client: Client, real_catalog: Catalog) -> None:
    response = client.get(
        f"/api/v1/recipes/{LEAF}/resolved.yaml", headers={"accept": "application/json"}
    )

    assert response.status_code == 200
    assert response["Content-Type"] == "application/yaml; charset=utf-8"


def test_it_answers_304_when_the_client_has_the_digest(
    client: Client, real_catalog: Catalog
) -> None:
    etag = client.get(f"/api/v1/recipes/{LEAF}/resolved.yaml")["ETag"]

    response = client.get(f"/api/v1/recipes/{LEAF}/resolved.yaml", headers={"if-none-match": etag})

    assert response.status_code == 304
    assert response.content == b""


# --- /api/v1/query/ -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        {"accelerator": "a100"},
        {
            "service": "eks",
            "accelerator": "h100",
            "intent": "training",
            "os": "ubuntu",
            "platform": "kubeflow",
        },
        {"service": "aks", "accelerator": "h100", "intent": "training", "os": "ubuntu"},
        {
            "service": "eks",
            "accelerator": "h100",
            "intent": "training",
            "os": "ubuntu",
            "platform": "slurm",
        },
    ],
)
def test_it_resolves_any_criteria_like_aicr(
    client: Client, real_catalog: Catalog, query: dict[str, str]
) -> None:
    expected = golden(query)

    response = client.get("/api/v1/query/", query)

    assert response.status_code == 200, response.content[:500]
    doc = response.json()
    assert doc["kind"] == "RecipeResult"
    assert doc["apiVersion"] == expected["apiVersion"]
    assert doc["metadata"]["appliedOverlays"] == expected["appliedOverlays"]
    assert doc["deploymentOrder"] == expected["deploymentOrder"]
    assert {c["name"]: c.get("version") or None for c in doc["componentRefs"]} == {
        c["name"]: c.get("version") or None for c in expected["components"]
    }


def test_it_selects_a_profile(client: Client, real_catalog: Catalog) -> None:
    query = {
        "service": "aks",
        "accelerator": "h100",
        "intent": "training",
        "os": "ubuntu",
        "platform": "kubeflow",
    }

    default = client.get("/api/v1/query/", query).json()
    chosen = client.get("/api/v1/query/", {**query, "profile": "gpuStack=operator-managed"})

    assert chosen.status_code == 200, chosen.content[:500]
    selected = chosen.json()["metadata"]["selectedProfile"]
    assert (selected["name"], selected["value"]) == ("gpuStack", "operator-managed")
    assert default["metadata"]["selectedProfile"]["value"] != "operator-managed"


@pytest.mark.parametrize(
    "query", [{"platform": "dynamo"}, {"os": "cos"}, {"service": "gke"}, {"os": "ubuntu"}]
)
def test_it_gives_aicrs_errors_for_unresolvable_criteria(
    client: Client, real_catalog: Catalog, query: dict[str, str]
) -> None:
    expected = golden(query)

    response = client.get("/api/v1/query/", query)

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "INVALID_REQUEST"
    assert "[INVALID_REQUEST] " + body["message"] == expected["error"]
    assert body["retryable"] is False
    assert response["X-Request-Id"] == body["requestId"]


def test_it_details_uncovered_dimensions(client: Client, real_catalog: Catalog) -> None:
    body = client.get("/api/v1/query/", {"os": "cos"}).json()

    assert body["details"]["uncovered"] == [
        {"dimension": "os", "requestedValue": "cos", "validCompletions": [{"service": "gke"}]}
    ]


def test_it_flags_a_required_os(client: Client, real_catalog: Catalog) -> None:
    body = client.get("/api/v1/query/", {"service": "oke", "accelerator": "l40s"}).json()

    assert body["details"]["requiresOS"] is True


def test_it_refuses_unknown_values_and_empty_queries(client: Client, real_catalog: Catalog) -> None:
    unknown = client.get("/api/v1/query/", {"service": "<script>"})
    empty = client.get("/api/v1/query/")

    assert unknown.status_code == 400
    assert unknown.json()["message"] == "Invalid recipe criteria"
    assert unknown["Content-Type"] == "application/json"
    assert empty.status_code == 400
    assert empty.json()["message"].startswith("no criteria provided")
