"""A recipe's history page in Chromium: the grid and the charts at 1280 x 900 and 390 x 844, a
cell permalink that scrolls to its cell and highlights it, no request off loopback, no console
error, no horizontal overflow on a phone."""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from evidence_app.models import Evidence
from recipes_app import history
from recipes_app.models import Catalog, Recipe
from tests.browser.test_dashboard_browser import errors, overflow
from tests.evidence_factories import EvidenceFactory, SignerFactory

pytestmark = pytest.mark.browser

KUBEFLOW = "h100-eks-ubuntu-training-kubeflow"
URL = f"/recipes/{KUBEFLOW}/history/"
SCREENSHOTS_ENV = "AICR_SCREENSHOTS"
NOW = datetime.now(UTC)


def watch_requests(page, base_url: str) -> list[str]:  # type: ignore[no-untyped-def]
    """Every URL the page asks for that is not this live server (should stay empty)."""
    elsewhere: list[str] = []
    page.on(
        "request",
        lambda request: (
            None
            if request.url.startswith((base_url, "data:", "about:"))
            else elsewhere.append(request.url)
        ),
    )
    return elsewhere


def lab_history(catalog: Catalog, runs: int = history.COLUMNS_SHOWN + 8) -> list[Evidence]:
    """Two counted labs and a reported one over ``runs`` days: NCCL bandwidth around the
    300 GB/s floor, one lab's operator-health flapping, a demo run and a simulated one."""
    recipe = Recipe.objects.get(catalog=catalog, name=KUBEFLOW)
    labs = [SignerFactory(label="lab-a/gpu"), SignerFactory(label="lab-b/gpu")]
    reported = SignerFactory(label="stranger/fork", counted=False, signer_class="reported")
    made = []
    for day in range(runs):
        signer = reported if day % 7 == 3 else labs[day % 2]
        bw = 280.0 + (day * 37) % 90
        results: dict[str, Any] = {}
        for phase, checks in recipe.checks.items():
            if phase == "readiness":
                continue
            results[phase] = {}
            for check in checks:
                status = "passed"
                if check["name"] == "operator-health" and day % 4 == 0:
                    status = "failed"
                if check["name"] == "nccl-all-reduce-bw" and bw < 300:
                    status = "failed"
                entry: dict[str, Any] = {"status": status}
                if phase == "performance":
                    entry["metrics"] = [{"label": check["name"], "value": bw, "unit": "GB/s"}]
                results[phase][check["name"]] = entry
        made.append(
            EvidenceFactory(
                recipe=recipe,
                signer=signer,
                attested_at=NOW - timedelta(days=runs - day),
                check_results=results,
                is_demo=day == runs - 2,
                is_simulated=day == runs - 3,
            )
        )
    return made


@pytest.mark.parametrize("viewport", [(1280, 900), (390, 844)])
def test_the_history_page_shows_the_grid_and_a_chart_with_its_threshold(
    open_page, catalog, console, live_server, viewport
):
    lab_history(catalog)
    page = open_page(viewport={"width": viewport[0], "height": viewport[1]})
    elsewhere = watch_requests(page, live_server.url)

    page.goto(URL)

    expect(page.locator("h1")).to_have_text(f"History of {KUBEFLOW}")
    expect(page.locator("th.hcol")).to_have_count(history.COLUMNS_SHOWN)
    declared = sum(
        len(checks)
        for phase, checks in Recipe.objects.get(catalog=catalog, name=KUBEFLOW).checks.items()
        if phase != "readiness"
    )
    expect(page.locator("tr.hrow")).to_have_count(declared)
    expect(
        page.locator('tr.hrow[data-check="deployment/operator-health"] .badge--flaky')
    ).to_be_visible()
    expect(page.locator("th.hcol .badge--demo")).to_have_count(1)
    expect(page.locator("th.hcol .badge--simulated")).to_have_count(1)

    svg = page.locator('[data-chart="nccl-all-reduce-bw/nccl-all-reduce-bw"] svg')
    svg.scroll_into_view_if_needed()
    expect(svg).to_be_visible()
    assert "threshold >= 300" in (svg.get_attribute("aria-label") or "")
    box = svg.bounding_box()
    assert box is not None
    assert box["width"] > 250
    assert box["x"] + box["width"] <= viewport[0]
    line = svg.locator("line.hchart__threshold").bounding_box()
    assert line is not None
    assert line["width"] > box["width"] / 2  # drawn across the plot
    assert svg.locator("circle.hchart__ok").count() > 0
    assert svg.locator("path.hchart__fail").count() > 0
    # The values behind the chart, for a screen reader or a copy.
    page.locator(".hchart__values summary").first.click()
    expect(page.locator(".hchart__values table").first).to_be_visible()

    # The last row is reachable by scrolling the page; the grid scrolls sideways in its box.
    last = page.locator("tr.hrow").last
    last.scroll_into_view_if_needed()
    expect(last).to_be_in_viewport()
    assert overflow(page) <= 0
    assert elsewhere == []
    assert errors(console) == []


def test_a_cell_link_is_a_permalink_that_scrolls_to_its_cell_and_highlights_it(
    open_page, catalog, console, live_server
):
    runs = lab_history(catalog)
    oldest = runs[0]
    page = open_page(viewport={"width": 1280, "height": 900})
    elsewhere = watch_requests(page, live_server.url)

    # The oldest record is not on the newest page: its permalink opens the page holding it.
    page.goto(f"{URL}?cell=nccl-all-reduce-bw@{oldest.pk}#c{oldest.pk}-nccl-all-reduce-bw")
    target = page.locator(f'[id="c{oldest.pk}-nccl-all-reduce-bw"]')
    expect(target).to_be_in_viewport()
    expect(target).to_have_class(re.compile(r"\bis-target\b"))
    outline = target.evaluate("e => getComputedStyle(e).outlineStyle")
    assert outline == "solid"

    # Clicking another cell's link gives that cell's permalink; opened fresh, it is highlighted.
    newest = runs[-1]
    page.goto(URL)
    link = page.locator(f'[id="c{newest.pk}-operator-health"] a')
    link.click()
    expect(page).to_have_url(
        re.compile(rf"\?cell=operator-health@{newest.pk}#c{newest.pk}-operator-health$")
    )
    fresh = open_page(viewport={"width": 390, "height": 844})
    fresh.goto(page.url)
    cell = fresh.locator(f'[id="c{newest.pk}-operator-health"]')
    expect(cell).to_be_in_viewport()
    expect(cell).to_have_class(re.compile(r"\bis-target\b"))
    assert overflow(fresh) <= 0
    assert elsewhere == []
    assert errors(console) == []


def test_older_and_newer_links_walk_the_records(page, catalog, console):
    runs = lab_history(catalog)
    page.goto(URL)
    first = page.locator("th.hcol").first.get_attribute("data-evidence")
    assert first == str(runs[-1].pk)

    page.get_by_role("link", name="Older →").first.click()
    expect(page).to_have_url(re.compile(r"\?from=\d+$"))
    expect(page.locator("th.hcol")).to_have_count(len(runs) - history.COLUMNS_SHOWN)
    page.get_by_role("link", name="← Newer").first.click()
    expect(page.locator("th.hcol").first).to_have_attribute("data-evidence", str(runs[-1].pk))
    assert errors(console) == []


def test_screenshots_of_the_history_page(open_page, catalog, tmp_path):
    """Desktop (1280 x 900) and phone (390 x 844) screenshots for the README."""
    lab_history(catalog)
    folder = Path(os.environ.get(SCREENSHOTS_ENV) or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    for size, viewport in (("desktop", (1280, 900)), ("phone", (390, 844))):
        page = open_page(viewport={"width": viewport[0], "height": viewport[1]})
        page.goto(URL)
        path = folder / f"history-{size}.png"
        page.screenshot(path=path)
        assert path.stat().st_size > 10_000, path
