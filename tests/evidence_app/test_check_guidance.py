"""``/check/`` guidance: criteria as the catalog's choices, AICR's suggested completions as
links, the verdict as a sentence, and what to run next."""

from __future__ import annotations

import re

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from evidence_app.coverage import guidance, service
from recipes_app.models import Catalog, Recipe
from tests.evidence_app.coverage_data import as_yaml, full_snapshot, publish

pytestmark = pytest.mark.usefixtures("evidence_db")
URL = "/check/"
STATED = {"intent": "training", "platform": "kubeflow"}


@pytest.fixture(autouse=True)
def _fresh_identity_cache() -> None:
    cache.clear()
    service._LOCAL.clear()


def _post(data: dict[str, str]) -> tuple[int, str]:
    client = Client()
    response = client.post(URL, data)
    return response.status_code, response.content.decode().replace("&#x27;", "'")


def _options(html: str, name: str) -> list[str]:
    select = re.search(rf'<select name="{name}"[^>]*>(.*?)</select>', html, re.S)
    assert select is not None, f"no select named {name}"
    return re.findall(r'<option value="([^"]*)"', select.group(1))


def test_the_criteria_are_the_current_catalogs_values_with_an_any(real_catalog: Catalog) -> None:
    html = Client().get(URL).content.decode()
    for dimension in ("service", "accelerator", "os", "intent", "platform"):
        expected = ["", *real_catalog.criteria_values[dimension]]
        assert _options(html, dimension) == [v for v in expected if v != "any"], dimension
    assert "any (from the snapshot)" in html
    assert "eks" in _options(html, "service")


def test_a_value_the_catalog_does_not_accept_is_refused_naming_the_field(
    real_catalog: Catalog,
) -> None:
    status, html = _post({"snapshot_text": as_yaml(full_snapshot()), "service": "nimbus"})
    assert status == 400
    assert "service 'nimbus' is not a value the current catalog accepts (one of: " in html
    assert "data-verdict" not in html


def test_every_value_of_the_catalog_is_accepted(real_catalog: Catalog) -> None:
    for dimension, values in real_catalog.criteria_values.items():
        if dimension not in ("service", "accelerator", "os", "intent", "platform"):
            continue
        for value in values:
            status, html = _post({"snapshot_text": as_yaml(full_snapshot()), dimension: value})
            assert "is not a value the current catalog accepts" not in html, (dimension, value)
            assert status in (200, 400), (dimension, value)


def test_a_link_chooses_its_criteria_in_the_form(real_catalog: Catalog) -> None:
    html = Client().get(URL, {"service": "eks", "intent": "training", "os": "plan9"}).content
    page = html.decode().replace("&#x27;", "'")
    assert re.search(r'<option value="eks" selected>', page)
    assert re.search(r'<option value="training" selected>', page)
    assert "os: 'plan9' is not a value the current catalog accepts; left at any." in page


def test_suggested_completions_are_links_with_the_completed_criteria(
    example_recipe: Recipe,
) -> None:
    status, html = _post({"snapshot_text": as_yaml(full_snapshot())})
    assert status == 200
    links = re.findall(r'<a href="([^"]+)" data-completion>Check with ([^<]+)</a>', html)
    # AICR's completions for eks/h100/ubuntu without intent, each keeping what the snapshot told.
    assert links == [
        (
            "/check/?service=eks&amp;accelerator=h100&amp;os=ubuntu&amp;intent=inference",
            "intent=inference",
        ),
        (
            "/check/?service=eks&amp;accelerator=h100&amp;os=ubuntu&amp;intent=training",
            "intent=training",
        ),
    ]


def test_a_completion_naming_a_catalog_recipe_links_the_recipe(example_recipe: Recipe) -> None:
    result = service.CheckResult(
        criteria={"service": "eks", "accelerator": "h100", "os": "ubuntu", "intent": "training"},
        criteria_origin={},
        identity={},
        valid_completions={"platform": ["platform=kubeflow", "platform=nimbus"]},
    )
    found = {c.label: c for c in guidance.completions(result)}
    assert found["platform=kubeflow"].recipe == example_recipe.name
    assert found["platform=kubeflow"].check_url.endswith("&intent=training&platform=kubeflow")
    assert found["platform=nimbus"].recipe is None


def test_following_a_completion_and_checking_again_resolves_the_recipe(
    example_recipe: Recipe,
) -> None:
    _status, html = _post({"snapshot_text": as_yaml(full_snapshot())})
    hrefs = re.findall(r'<a href="([^"]+)" data-completion>', html)
    training = next(h for h in hrefs if "intent=training" in h).replace("&amp;", "&")
    page = Client().get(training).content.decode()
    chosen = dict(
        re.findall(
            r'<select name="(\w+)"[^>]*>(?:(?!</select>).)*?<option value="([^"]+)" selected>',
            page,
            re.S,
        )
    )
    assert chosen == {"service": "eks", "accelerator": "h100", "os": "ubuntu", "intent": "training"}
    status, answer = _post(
        {"snapshot_text": as_yaml(full_snapshot()), **chosen, "platform": "kubeflow"}
    )
    assert status == 200
    assert f'<a href="/recipes/{example_recipe.name}/">' in answer


def test_the_verdict_is_a_sentence_with_what_to_run_next(example_recipe: Recipe) -> None:
    status, html = _post({"snapshot_text": as_yaml(full_snapshot()), **STATED})
    assert status == 200
    verdict = re.search(r"<p data-verdict>([^<]+)</p>", html)
    assert verdict is not None
    assert verdict.group(1) == f"Not validated: no counted evidence for {example_recipe.name}."
    steps = html[html.index("data-next-steps") :]
    assert (
        "aicr recipe --service eks --accelerator h100 --os ubuntu --intent training "
        "--platform kubeflow --output recipe.yaml" in steps
    )
    assert "aicr validate --recipe recipe.yaml --emit-attestation ./out" in steps


def test_a_covered_cluster_has_nothing_to_run(example_recipe: Recipe) -> None:
    publish(example_recipe, full_snapshot())
    _status, html = _post({"snapshot_text": as_yaml(full_snapshot()), **STATED})
    assert "<p data-verdict>Validated on this exact tuple by 1 signer.</p>" in html
    assert "data-next-steps" not in html


def test_a_failing_constraint_says_to_fix_it_and_snapshot_again(example_recipe: Recipe) -> None:
    _status, html = _post({"snapshot_text": as_yaml(full_snapshot(k8s="v1.31.2")), **STATED})
    assert "Not validated: the snapshot fails the recipe's constraints" in html
    assert "aicr snapshot --output snapshot.yaml" in html


def test_the_guidance_costs_a_bounded_number_of_queries(example_recipe: Recipe) -> None:
    for _ in range(3):
        publish(example_recipe, full_snapshot(driver="570.86.15"))
    client = Client()
    data = {"snapshot_text": as_yaml(full_snapshot()), **STATED}
    client.post(URL, data)  # warm the identity cache
    with CaptureQueriesContext(connection) as few:
        client.post(URL, data)
    for _ in range(5):
        publish(example_recipe, full_snapshot(driver="570.86.15"))
    client.post(URL, data)
    with CaptureQueriesContext(connection) as more:
        client.post(URL, data)
    assert len(more) == len(few)
    assert len(few) <= 12
