"""Comparing two evidence records of one recipe: what differs is marked in words, records of
different recipes are refused with a 400 saying so, unknown ids are a 404 naming them, a
withdrawn record is compared and shown as withdrawn, and the page reads a fixed number of
queries whatever the records hold."""

from __future__ import annotations

import copy
import html
import re
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from evidence_app.compare import CompareError, evidence_compare, parse_id
from evidence_app.models import Evidence
from recipes_app.models import Recipe
from tests.evidence_factories import EvidenceFactory, example_statement
from tests.factories import CatalogFactory, RecipeFactory

pytestmark = pytest.mark.django_db

URL = reverse("evidence:compare")


def results(**checks: tuple[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """``check_results`` with one CTRF test per keyword: name=(status, metrics)."""
    tests = [
        {"name": name, "status": status, "duration_ms": 1000, "metrics": metrics}
        for name, (status, metrics) in checks.items()
    ]
    return {"performance": tests}


def fingerprint_predicate(*, k8s: str, gpu: str) -> dict[str, Any]:
    predicate = copy.deepcopy(example_statement()["predicate"])
    predicate["fingerprint"] = {
        "k8sVersion": {"value": k8s},
        "gpuModel": {"value": gpu},
        "os": {"value": "ubuntu", "version": "24.04"},
    }
    return predicate


@pytest.fixture
def recipe() -> Recipe:
    return RecipeFactory(catalog=CatalogFactory())


@pytest.fixture
def pair(recipe: Recipe) -> tuple[Evidence, Evidence]:
    bandwidth = {"label": "bus bandwidth", "value": 400.0, "unit": "GB/s"}
    a = EvidenceFactory(
        recipe=recipe,
        attested_at=datetime(2026, 11, 1, tzinfo=UTC),
        predicate=fingerprint_predicate(k8s="1.33.5", gpu="H100"),
        check_results=results(
            **{"nccl-all-reduce-bw": ("passed", [bandwidth]), "inference-ttft": ("passed", [])}
        ),
    )
    b = EvidenceFactory(
        recipe=recipe,
        attested_at=datetime(2026, 11, 20, tzinfo=UTC),
        predicate=fingerprint_predicate(k8s="1.34.1", gpu="H100"),
        check_results=results(
            **{
                "nccl-all-reduce-bw": ("failed", [{**bandwidth, "value": 300.0}]),
                "inference-ttft": ("passed", []),
            }
        ),
    )
    return a, b


def rows_marked(page: str) -> list[str]:
    """The header cell text of every row marked as different."""
    found = re.findall(
        r'<tr class="compare-row is-different"[^>]*>\s*<th scope="row"[^>]*>(.*?)</th>', page, re.S
    )
    return [" ".join(html.unescape(re.sub(r"<[^>]+>", " ", cell)).split()) for cell in found]


def test_it_marks_what_differs_in_words(client: Client, pair: tuple[Evidence, Evidence]) -> None:
    a, b = pair

    response = client.get(URL, {"a": a.pk, "b": b.pk})

    assert response.status_code == 200
    page = response.content.decode()
    marked = rows_marked(page)
    assert "Kubernetes version" in marked
    assert "GPU model" not in marked  # both H100
    assert "performance nccl-all-reduce-bw" in marked
    assert "performance inference-ttft" not in marked
    assert "nccl-all-reduce-bw bus bandwidth" in marked
    assert "-25.0 %" in page  # 300 against 400
    assert page.count("≠ differs") == len(marked) + 1  # and once in the explanation
    assert "1.33.5" in page
    assert "1.34.1" in page


def test_it_counts_the_differences(pair: tuple[Evidence, Evidence]) -> None:
    a, b = pair

    comparison = evidence_compare(a_id=a.pk, b_id=b.pk)

    differing = [r.label for r in comparison.identities if r.differs]
    assert differing == ["Kubernetes version"]
    assert [c.name for c in comparison.checks if c.differs] == ["nccl-all-reduce-bw"]
    assert comparison.difference_count == 3  # identity, check, number
    assert comparison.same_recipe_digest


def test_identities_neither_records_are_not_recorded(pair: tuple[Evidence, Evidence]) -> None:
    a, b = pair

    comparison = evidence_compare(a_id=a.pk, b_id=b.pk)

    kernel = next(r for r in comparison.identities if r.label == "kernel")
    assert (kernel.a, kernel.b) == ("not recorded", "not recorded")


def test_records_of_different_recipes_are_a_400_saying_so(
    client: Client, pair: tuple[Evidence, Evidence]
) -> None:
    other = EvidenceFactory(recipe=RecipeFactory(catalog=pair[0].recipe.catalog))

    response = client.get(URL, {"a": pair[0].pk, "b": other.pk})

    assert response.status_code == 400
    text = html.unescape(response.content.decode())
    assert "only records of one recipe can be compared" in text
    assert other.recipe_name in text
    assert pair[0].recipe_name in text


def test_an_unknown_id_is_a_404_naming_it(client: Client, pair: tuple[Evidence, Evidence]) -> None:
    response = client.get(URL, {"a": pair[0].pk, "b": 999999})

    assert response.status_code == 404
    assert "No evidence #999999." in response.content.decode()


def test_an_unknown_first_id_without_a_second_is_a_404_naming_it(client: Client) -> None:
    response = client.get(URL, {"a": 999999})

    assert response.status_code == 404
    assert "No evidence #999999." in response.content.decode()


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({}, "Parameter “a” is missing"),
        ({"a": "x"}, "Parameter “a” must be an evidence id"),
        ({"a": "1", "b": "-3"}, "Parameter “b” must be an evidence id"),
        ({"a": "1", "b": "1"}, "name the same record"),
        ({"a": "٣"}, "Parameter “a” must be an evidence id"),
        ({"a": "9" * 40}, "Parameter “a” must be an evidence id"),
    ],
)
def test_bad_ids_are_a_400_naming_the_parameter(
    client: Client, query: dict[str, str], message: str
) -> None:
    response = client.get(URL, query)

    assert response.status_code == 400
    assert message in html.unescape(response.content.decode())


def test_parse_id_takes_a_positive_number() -> None:
    assert parse_id(" 42 ", parameter="a") == 42
    with pytest.raises(CompareError):
        parse_id("0", parameter="a")


def test_a_withdrawn_record_is_compared_and_shown_as_withdrawn(
    client: Client, pair: tuple[Evidence, Evidence]
) -> None:
    a, b = pair
    Evidence.objects.filter(pk=b.pk).update(
        withdrawn_at=timezone.now(), withdrawal_reason="wrong cluster"
    )

    response = client.get(URL, {"a": a.pk, "b": b.pk})

    assert response.status_code == 200
    page = response.content.decode()
    assert "WITHDRAWN" in page
    assert "Withdrawn " in page
    assert "wrong cluster" in page
    status = evidence_compare(a_id=a.pk, b_id=b.pk).records[2]
    assert (status.label, status.a, status.b) == ("Status", "counted", "withdrawn")


def test_a_alone_offers_the_records_to_compare_with(
    client: Client, pair: tuple[Evidence, Evidence]
) -> None:
    a, b = pair

    response = client.get(URL, {"a": a.pk})

    assert response.status_code == 200
    page = response.content.decode()
    assert f'<option value="{b.pk}">#{b.pk} ' in page
    assert f'<option value="{a.pk}" selected>' in page


def test_hostile_text_is_escaped(client: Client, recipe: Recipe) -> None:
    hostile = '<script>alert("x")</script>'
    a = EvidenceFactory(recipe=recipe, check_results=results(**{hostile: ("passed", [])}))
    b = EvidenceFactory(recipe=recipe, aicr_version=hostile)

    page = client.get(URL, {"a": a.pk, "b": b.pk}).content.decode()

    assert hostile not in page
    assert html.escape(hostile) in page


def test_the_queries_do_not_grow_with_the_records(client: Client, recipe: Recipe) -> None:
    small = [EvidenceFactory(recipe=recipe) for _ in range(2)]
    many = {f"check-{i}": ("passed", [{"label": "n", "value": i, "unit": ""}]) for i in range(60)}
    large = [EvidenceFactory(recipe=recipe, check_results=results(**many)) for _ in range(2)]
    for extra in range(5):
        EvidenceFactory(recipe=recipe, aicr_version=f"v0.{extra}.0")
    client.get(URL, {"a": small[0].pk, "b": small[1].pk})  # warm the identity cache

    with CaptureQueriesContext(connection) as few:
        assert client.get(URL, {"a": small[0].pk, "b": small[1].pk}).status_code == 200
    client.get(URL, {"a": large[0].pk, "b": large[1].pk})
    with CaptureQueriesContext(connection) as more:
        assert client.get(URL, {"a": large[0].pk, "b": large[1].pk}).status_code == 200

    assert len(few) == len(more)


def test_the_evidence_page_links_to_the_others(
    client: Client, pair: tuple[Evidence, Evidence]
) -> None:
    a, b = pair

    page = client.get(reverse("evidence:detail", args=[a.pk])).content.decode()

    assert f'action="{URL}"' in page
    assert f'<input type="hidden" name="a" value="{a.pk}">' in page
    assert f'<option value="{b.pk}">' in page
    assert f'<option value="{a.pk}">' not in page


def test_the_recipe_page_links_the_two_newest(
    client: Client, pair: tuple[Evidence, Evidence]
) -> None:
    a, b = pair

    page = client.get(reverse("recipes:detail", args=[a.recipe_name])).content.decode()

    assert f'href="{URL}?a={a.pk}&amp;b={b.pk}"' in page
