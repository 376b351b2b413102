"""The home page and the recipe list answer "what is validated" first, in Chromium.

Over the demo data (every consensus state, reached through the real ingest and rules):
at 1280 px no state label is cut; on a phone (390 x 844) the home page shows only the cells
with evidence and names each row's other cells in one line. The phone page's height is
printed (a figure, not asserted: it depends on fonts). The history page's signer badges stay
inside their record's column.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from evidence_app.consensus import STATES, recipe_badge
from evidence_app.services import demo
from recipes_app.models import Catalog, Recipe

pytestmark = pytest.mark.browser

# Every state label on the page: matrix cells, the legend, the list's consensus column.
LABELS = ".coverage-matrix .state, .state-legend .state, .consensus-cell .state"
CUT_LABELS = """(selector) => [...document.querySelectorAll(selector)]
    .filter((el) => el.scrollWidth > el.clientWidth)
    .map((el) => el.textContent.trim())"""


@pytest.fixture
def seeded(catalog: Catalog) -> dict[str, str]:
    """The demo data; each demo recipe's stored state."""
    result = demo.seed_demo()
    assert not result.failed, result.failed
    return result.states


def test_no_state_label_is_cut_at_1280_px(page, seeded):
    assert set(seeded.values()) == set(STATES) - {"UNTESTED"}
    for url in ("/", "/recipes/"):
        page.goto(url)
        labels = page.locator(LABELS)
        expect(labels.first).to_be_visible()
        shown = set(labels.all_inner_texts())
        assert {"CONFIRMED", "CONTESTED", "UNTESTED"} <= {t.split()[0] for t in shown}, url
        assert page.evaluate(CUT_LABELS, LABELS) == [], url


def test_the_list_starts_with_what_is_validated(page, seeded):
    page.goto("/recipes/")
    states = page.locator("#results td.consensus-cell").evaluate_all(
        "(cells) => cells.map((c) => c.dataset.consensus)"
    )
    ranked = sorted(states, key=STATES.index)
    assert states == ranked
    assert states[:5] == ["CONFIRMED", "SINGLE", "PARTIAL", "CONTESTED", "FAILING"]

    page.locator("#f-has-evidence").check()
    expect(page).to_have_url(re.compile(r"/recipes/\?has_evidence=1$"))
    expect(page.locator("#results td.recipe-name")).to_have_count(len(seeded))


def test_has_evidence_works_without_javascript(open_page, seeded):
    page = open_page(viewport={"width": 1280, "height": 900}, java_script_enabled=False)
    page.goto("/recipes/")
    page.locator("#f-has-evidence").check()
    page.get_by_role("button", name="Apply filters").click()
    assert "has_evidence=1" in page.url  # a plain GET form sends every field
    expect(page.locator("#results td.recipe-name")).to_have_count(len(seeded))


def test_a_phone_home_shows_only_cells_with_evidence(open_page, catalog, seeded):
    page = open_page(viewport={"width": 390, "height": 844}, device_scale_factor=2)
    page.goto("/")
    recipes = Recipe.objects.filter(catalog=catalog).select_related("consensus")
    with_evidence = {
        f"{r.service}/{r.platform}/{r.accelerator}"
        for r in recipes
        if recipe_badge(r).stale.counted_runs
    }

    visible = page.locator(".coverage-matrix td.matrix-cell:visible a.matrix-link")
    shown = set(visible.evaluate_all("(links) => links.map((a) => a.dataset.cell)"))
    assert shown == with_evidence
    # Each row: its cells with evidence, then one line naming every other cell it has.
    rows = page.locator(".coverage-matrix tbody tr")
    for i in range(rows.count()):
        row = rows.nth(i)
        others = row.locator("td.matrix-cell--no-evidence").count()
        rest = row.locator(".matrix-rest:visible")
        if others:
            expect(rest).to_have_count(1)
            assert rest.locator("a").count() == others
            box = rest.bounding_box()
            assert box is not None
            line = page.evaluate(
                "(el) => parseFloat(getComputedStyle(el).lineHeight)", rest.element_handle()
            )
            assert box["height"] <= 3 * line  # a line (wrapping at most twice), not a cell each
        else:
            expect(rest).to_have_count(0)
    assert page.locator(".matrix-cell--empty:visible").count() == 0
    height = page.evaluate("document.documentElement.scrollHeight")
    print(f"home at 390x844: {height} px tall, {len(shown)} cells with evidence shown")
    overflow = page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow <= 0


@pytest.mark.parametrize("width", [1280, 390])
def test_history_signer_badges_stay_inside_their_column(open_page, catalog, seeded, width):
    confirmed = next(name for name, state in seeded.items() if state == "CONFIRMED")
    page = open_page(viewport={"width": width, "height": 900})
    page.goto(f"/recipes/{confirmed}/history/")
    badges = page.locator("th.hcol .badge")
    expect(badges.first).to_be_visible()
    spilled = badges.evaluate_all(
        """(badges) => badges.filter((b) => {
            const own = b.getBoundingClientRect(), col = b.closest('th').getBoundingClientRect();
            return own.left < col.left - 0.5 || own.right > col.right + 0.5;
        }).map((b) => b.textContent)"""
    )
    assert badges.count() >= 4  # DEMO on every record, stale codes on the old ones
    assert spilled == []
