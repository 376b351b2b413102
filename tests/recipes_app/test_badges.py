"""``/badges/<recipe>.svg`` and the Markdown snippet on the recipe page."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta
from html import unescape

import pytest

from evidence_app.corroborate import CONFIRMED, SINGLE, UNTESTED
from recipes_app.models import Catalog, Recipe
from tests.evidence_factories import EvidenceFactory, SignerFactory

pytestmark = pytest.mark.django_db

KUBEFLOW = "h100-eks-ubuntu-training-kubeflow"
SVG = "{http://www.w3.org/2000/svg}"


def passing(recipe: Recipe) -> dict[str, list[dict[str, str]]]:
    return {
        phase: [{"name": c["name"], "status": "passed"} for c in checks]
        for phase, checks in recipe.checks.items()
        if phase != "readiness"
    }


def badge(client, name: str) -> tuple[int, str, ET.Element]:  # type: ignore[no-untyped-def]
    response = client.get(f"/badges/{name}.svg")
    assert response["Content-Type"] == "image/svg+xml"
    root = ET.fromstring(response.content)  # noqa: S314 (this site's own output, in a test)
    title = root.find(f"{SVG}title")
    assert title is not None
    return response.status_code, title.text or "", root


def test_an_untested_recipe_says_untested(client, real_catalog: Catalog):
    status, title, root = badge(client, KUBEFLOW)
    assert status == 200
    assert title == f"AICR: {UNTESTED}"
    assert root.get("aria-label") == title


def test_it_shows_state_counted_signers_and_last_attestation(client, real_catalog: Catalog):
    recipe = Recipe.objects.get(catalog=real_catalog, name=KUBEFLOW)
    when = datetime(2026, 11, 20, 12, tzinfo=UTC)
    EvidenceFactory(recipe=recipe, check_results=passing(recipe), attested_at=when)
    assert badge(client, KUBEFLOW)[1] == f"AICR: {SINGLE} · 1 signer · 2026-11-20"

    EvidenceFactory(
        recipe=recipe, check_results=passing(recipe), attested_at=when + timedelta(days=1)
    )
    EvidenceFactory(recipe=recipe, signer=SignerFactory(counted=False), check_results={})
    status, title, root = badge(client, KUBEFLOW)
    assert status == 200
    assert title == f"AICR: {CONFIRMED} · 2 signers · 2026-11-21"
    # The box is wide enough for its text.
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert texts == ["AICR", f"{CONFIRMED} · 2 signers · 2026-11-21"]
    assert int(root.get("width") or 0) >= 6 * (len(texts[0]) + len(texts[1]))


def test_stale_and_demo_are_said_in_words(client, real_catalog: Catalog):
    recipe = Recipe.objects.get(catalog=real_catalog, name=KUBEFLOW)
    EvidenceFactory(
        recipe=recipe,
        check_results=passing(recipe),
        is_demo=True,
        attested_at=datetime.now(UTC) - timedelta(days=60),
    )
    title = badge(client, KUBEFLOW)[1]
    assert title.startswith(f"AICR: {SINGLE} (stale) DEMO · 1 signer · ")


def test_an_unknown_or_hostile_name_is_a_404_badge(client, real_catalog: Catalog):
    for name in ("no-such-recipe", "%3Cscript%3E", "x%22%20onload%3D%22alert(1)"):
        status, title, _ = badge(client, name)
        assert status == 404
        assert title == "AICR: unknown recipe"


def test_the_recipe_page_offers_the_badge_markdown(client, real_catalog: Catalog):
    html = client.get(f"/recipes/{KUBEFLOW}/").content.decode()
    snippet = html[html.index('<code id="badge-markdown">') :]
    snippet = unescape(snippet[len('<code id="badge-markdown">') : snippet.index("</code>")])
    assert snippet == (
        f"[![AICR consensus: {KUBEFLOW}](http://testserver/badges/{KUBEFLOW}.svg)]"
        f"(http://testserver/recipes/{KUBEFLOW}/)"
    )
    assert f'src="http://testserver/badges/{KUBEFLOW}.svg"' in html
