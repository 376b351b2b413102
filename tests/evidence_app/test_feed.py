"""``/feeds/evidence.atom``: new, withdrawn and newly stale evidence, filterable, parsed as XML."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from recipes_app.models import Catalog, Recipe
from tests.evidence_factories import EvidenceFactory

pytestmark = pytest.mark.django_db

ATOM = "{http://www.w3.org/2005/Atom}"
KUBEFLOW = "h100-eks-ubuntu-training-kubeflow"


def entries(client, query: str = "") -> list[tuple[str, str, str]]:  # type: ignore[no-untyped-def]
    """(id, title, category) of each entry, in feed order."""
    response = client.get("/feeds/evidence.atom" + query)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("application/atom+xml")
    root = ET.fromstring(response.content)  # noqa: S314 (this site's own output, in a test)
    assert root.tag == f"{ATOM}feed"
    out = []
    for entry in root.findall(f"{ATOM}entry"):
        category = entry.find(f"{ATOM}category")
        out.append(
            (
                entry.findtext(f"{ATOM}id") or "",
                entry.findtext(f"{ATOM}title") or "",
                category.get("term", "") if category is not None else "",
            )
        )
    return out


@pytest.fixture
def history(real_catalog: Catalog) -> dict[str, object]:
    kubeflow = Recipe.objects.get(catalog=real_catalog, name=KUBEFLOW)
    other = Recipe.objects.filter(catalog=real_catalog, service="gke").first()
    assert other is not None
    now = datetime.now(UTC)
    fresh = EvidenceFactory(recipe=kubeflow, attested_at=now - timedelta(days=1))
    old = EvidenceFactory(recipe=other, attested_at=now - timedelta(days=40), is_demo=True)
    gone = EvidenceFactory(
        recipe=kubeflow,
        attested_at=now - timedelta(days=2),
        withdrawn_at=now,
        withdrawal_reason="wrong cluster",
    )
    return {"fresh": fresh, "old": old, "gone": gone, "other": other}


def test_it_reports_new_withdrawn_and_newly_stale_evidence(client, history):
    found = entries(client)
    ids = {entry_id for entry_id, _, _ in found}
    for key in ("fresh", "old", "gone"):
        assert f"evidence-{history[key].pk}-new" in ids  # type: ignore[attr-defined]
    assert f"evidence-{history['gone'].pk}-withdrawn" in ids  # type: ignore[attr-defined]
    assert f"evidence-{history['old'].pk}-stale" in ids  # type: ignore[attr-defined]
    assert f"evidence-{history['fresh'].pk}-stale" not in ids  # type: ignore[attr-defined]
    # The stale event is dated when the record aged out (10 days ago), so it comes last.
    assert found[-1][0] == f"evidence-{history['old'].pk}-stale"  # type: ignore[attr-defined]
    assert "[DEMO]" in found[-1][1]
    assert {category for _, _, category in found} == {"new", "withdrawn", "stale"}


def test_it_filters_by_recipe_service_and_accelerator(client, history):
    other = history["other"]
    by_recipe = entries(client, f"?recipe={KUBEFLOW}")
    assert by_recipe
    assert all(KUBEFLOW in title for _, title, _ in by_recipe)
    by_service = entries(client, "?service=gke")
    assert by_service
    assert all(other.name in title for _, title, _ in by_service)  # type: ignore[attr-defined]
    assert entries(client, "?service=eks&accelerator=h100") == by_recipe


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("?recipe=nope", "recipe: no recipe of the current catalog has “nope”"),
        ("?service=%3Cscript%3E", "service: no recipe of the current catalog has “<script>”"),
        ("?accelerator=" + "x" * 5000, "accelerator: no recipe"),
    ],
)
def test_an_unknown_filter_value_is_a_400_naming_it(client, history, query, named):
    response = client.get("/feeds/evidence.atom" + query)
    assert response.status_code == 400
    assert named in response.content.decode()
    assert response["Content-Type"].startswith("text/plain")


def test_the_query_count_does_not_grow_with_evidence(client, history, real_catalog):
    def queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            client.get("/feeds/evidence.atom")
        return len(ctx.captured_queries)

    few = queries()
    recipe = Recipe.objects.get(catalog=real_catalog, name=KUBEFLOW)
    for days in range(20):
        EvidenceFactory(recipe=recipe, attested_at=datetime.now(UTC) - timedelta(days=days * 3))
    assert queries() == few
