"""The qualifications table in a real browser: sorting by a column header and filtering with
the form (both plain links and GET, so also with JavaScript off), and a 320 px phone where the
table scrolls inside its own box and the page never scrolls sideways.

Screenshots go to ``$EVIDENCE_SCREENSHOTS`` (default: the test's tmp_path) for review.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from recipes_app.models import Recipe
from tests.evidence_factories import EXAMPLE_RECIPE, EvidenceFactory

pytestmark = pytest.mark.browser


def _identity(driver: str, gpu: str, count: str) -> dict[str, str | None]:
    return {
        "k8s_version": "1.33.5",
        "gpu_model": gpu,
        "gpu_count": count,
        "driver": driver,
        "gpu_operator": "v25.10.1",
        "instance_type": "p5.48xlarge",
    }


@pytest.fixture
def rows(catalog):  # type: ignore[no-untyped-def]
    recipe = Recipe.objects.get(catalog=catalog, name=EXAMPLE_RECIPE)
    made = {}
    for name, driver, gpu in (("a", "580.95.05", "H100"), ("b", "570.86.15", "GB200")):
        made[name] = EvidenceFactory(
            recipe=recipe,
            identity=_identity(driver, gpu, "8"),
            gpu_model=gpu,
            gpu_count=8,
        )
    return made


def _order(page) -> list[str]:  # type: ignore[no-untyped-def]
    return page.locator("tr.qual-row").evaluate_all("rows => rows.map(r => r.dataset.evidence)")


def test_it_sorts_by_a_header_and_filters_with_the_form(open_page, rows, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    shots = Path(os.environ.get("EVIDENCE_SCREENSHOTS") or tmp_path)
    for javascript in (True, False):
        page = open_page(viewport={"width": 1280, "height": 900}, java_script_enabled=javascript)
        page.goto("/qualifications/")
        expect(page.locator("tr.qual-row")).to_have_count(2)
        page.get_by_role("link", name="Driver / GPU Operator").click()
        expect(page).to_have_url("/qualifications/?sort=driver", ignore_case=True)
        assert _order(page) == [str(rows["b"].pk), str(rows["a"].pk)]  # 570 before 580
        expect(page.locator('th[aria-sort="ascending"]')).to_contain_text("Driver")
        page.get_by_role("link", name="Driver / GPU Operator ▲").click()
        assert _order(page) == [str(rows["a"].pk), str(rows["b"].pk)]
        page.get_by_label("GPU").select_option("GB200")
        page.get_by_role("button", name="Show").click()
        expect(page.locator("tr.qual-row")).to_have_count(1)
        assert _order(page) == [str(rows["b"].pk)]
        assert "gpu=GB200" in page.url
        assert "sort=-driver" in page.url
        page.screenshot(path=str(shots / f"qualifications-js-{javascript}.png"), full_page=True)


def test_a_phone_scrolls_the_table_not_the_page(open_page, rows, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    page = open_page(viewport={"width": 320, "height": 700})
    page.goto("/qualifications/")
    overflow, inner = page.evaluate(
        """() => {
            const box = document.querySelector('.qual-scroll');
            return [document.documentElement.scrollWidth - window.innerWidth,
                    box.scrollWidth > box.clientWidth];
        }"""
    )
    assert overflow <= 0
    assert inner  # the table is wider than the phone: its own box scrolls
    expect(page.locator(".qual-table thead th").first).to_be_visible()
