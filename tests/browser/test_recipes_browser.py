"""The recipe pages in a real browser: in-place filtering, history, CSP, copy, phone layout."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import expect

from recipes_app.models import Catalog, Recipe
from recipes_app.services import catalog_import
from tests.factories import CatalogFactory

pytestmark = pytest.mark.browser

KUBEFLOW = "h100-eks-ubuntu-training-kubeflow"
ROWS = "#results td.recipe-name > a"


def query_of(url: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(url).query)


def names(catalog, **criteria: str) -> list[str]:  # type: ignore[no-untyped-def]
    return sorted(Recipe.objects.filter(catalog=catalog, **criteria).values_list("name", flat=True))


def shown(page) -> list[str]:  # type: ignore[no-untyped-def]
    return sorted(page.locator(ROWS).all_inner_texts())


def test_it_filters_in_place_and_keeps_the_url_shareable(page, catalog):
    eks = names(catalog, service="eks")
    page.goto("/recipes/")
    page.evaluate("window.__notReloaded = true")

    page.select_option("#f-service", "eks")

    expect(page).to_have_url(re.compile(r"/recipes/\?service=eks$"))
    expect(page.locator(ROWS)).to_have_count(len(eks))
    assert shown(page) == eks
    assert page.evaluate("window.__notReloaded") is True  # swapped in place, no reload
    # The facet counts were swapped too: they now count within eks.
    h100_eks = len(names(catalog, service="eks", accelerator="h100"))
    expect(page.locator("#f-accelerator option[value=h100]")).to_have_text(f"h100 ({h100_eks})")

    page.reload()

    expect(page.locator("#f-service")).to_have_value("eks")
    assert shown(page) == eks
    assert page.evaluate("window.__notReloaded") is None


def test_it_restores_the_previous_state_on_back_and_forward(page, catalog):
    eks = names(catalog, service="eks")
    eks_h100 = names(catalog, service="eks", accelerator="h100")
    page.goto("/recipes/")
    page.evaluate("window.__notReloaded = true")
    page.select_option("#f-service", "eks")
    expect(page).to_have_url(re.compile(r"service=eks$"))
    page.select_option("#f-accelerator", "h100")
    expect(page).to_have_url(re.compile(r"service=eks&accelerator=h100$"))
    expect(page.locator(ROWS)).to_have_count(len(eks_h100))

    page.go_back()

    expect(page).to_have_url(re.compile(r"/recipes/\?service=eks$"))
    expect(page.locator(ROWS)).to_have_count(len(eks))
    assert shown(page) == eks
    expect(page.locator("#f-service")).to_have_value("eks")
    expect(page.locator("#f-accelerator")).to_have_value("")

    page.go_forward()

    expect(page).to_have_url(re.compile(r"accelerator=h100$"))
    expect(page.locator(ROWS)).to_have_count(len(eks_h100))
    expect(page.locator("#f-accelerator")).to_have_value("h100")
    assert page.evaluate("window.__notReloaded") is True


def test_it_searches_free_text_as_you_type(page, catalog):
    expected = sorted(
        r.name for r in Recipe.objects.filter(catalog=catalog).matching_text("dynamo gb200")
    )
    assert expected
    page.goto("/recipes/")
    page.evaluate("window.__notReloaded = true")

    page.locator("#q").press_sequentially("dynamo gb200", delay=20)

    expect(page).to_have_url(re.compile(r"q=dynamo\+gb200$"))
    expect(page.locator(ROWS)).to_have_count(len(expected))
    assert shown(page) == expected
    expect(page.locator("#q")).to_be_focused()  # the box being typed in is never replaced
    assert page.evaluate("window.__notReloaded") is True

    page.locator("#q").fill("no-such-thing-anywhere")

    expect(page.locator("#results")).to_contain_text("No recipe matches these filters")


def test_it_works_without_javascript(open_page, catalog):
    page = open_page(java_script_enabled=False)
    page.goto("/recipes/")

    page.select_option("#f-service", "gke")
    page.click("text=Apply filters")

    assert query_of(page.url)["service"] == ["gke"]
    assert shown(page) == names(catalog, service="gke")


def test_it_copies_the_aicr_command(page, catalog):
    page.goto(f"/recipes/{KUBEFLOW}/")
    command = page.locator("#aicr-command").inner_text().strip()
    assert command.startswith("aicr recipe --service eks --accelerator h100")

    page.get_by_role("button", name="Copy command").click()

    expect(
        page.locator("#aicr-command").locator("xpath=ancestor::div[1]").locator(".copy-status")
    ).to_have_text("Copied to the clipboard.")
    assert page.evaluate("navigator.clipboard.readText()") == command


def test_it_switches_the_diff_and_back(page, catalog, real_tree_files, tmp_path):
    path = f"overlays/{KUBEFLOW}.yaml"
    files = {**real_tree_files, path: real_tree_files[path].replace(">= 1.32.4", ">= 1.33.0")}
    empty = CatalogFactory(source="an older, empty version")
    Catalog.objects.filter(pk=empty.pk).update(imported_at=catalog.imported_at.replace(year=2000))
    catalog_import(files=files, source="modified copy", aicr_version="dev")
    page.goto(f"/recipes/{KUBEFLOW}/")

    diff = page.locator("#diff")
    expect(diff).to_contain_text(f"Against catalog #{catalog.pk}")
    expect(diff.locator(".diff-line--del")).to_contain_text(">= 1.32.4")
    expect(diff.locator(".diff-line--add")).to_contain_text(">= 1.33.0")
    page.evaluate("document.getElementById('diff').scrollIntoView()")
    page.screenshot(path=tmp_path / "detail-diff.png")

    page.select_option("#against", str(empty.pk))
    page.locator(".diff-picker").get_by_role("button", name="Compare").click()

    expect(page).to_have_url(re.compile(rf"against={empty.pk}#diff$"))
    expect(diff).to_contain_text("it is not in that version")
    assert page.evaluate("window.scrollY") > 0  # it opens at the diff, not the page's top

    page.go_back()

    expect(page.locator("#diff .diff-line--add")).to_contain_text(">= 1.33.0")


def test_it_pages_have_no_csp_violations(page, catalog, console):
    """Every page and interaction, with the console watched (the fixture fails on any)."""
    page.goto("/recipes/")
    page.select_option("#f-intent", "training")
    expect(page).to_have_url(re.compile(r"intent=training"))
    page.goto("/recipes/?service=nope")
    expect(page.locator(".alert--error")).to_contain_text("nope")
    page.goto(f"/recipes/{KUBEFLOW}/")
    page.locator("details.yaml summary").click()
    page.get_by_role("button", name="Copy command").click()
    page.goto("/recipes/no-such-recipe/")

    assert console.csp_violations() == []
    assert not [m for m in console.messages if m.startswith("pageerror")]


def test_it_fits_a_phone_screen(open_page, catalog, tmp_path):
    page = open_page(viewport={"width": 390, "height": 844}, device_scale_factor=2)

    for url in ("/recipes/", f"/recipes/{KUBEFLOW}/"):
        page.goto(url)
        if page.locator("details.yaml").count():
            page.locator("details.yaml summary").click()  # 2,000 lines of YAML, opened
        overflow = page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0, f"{url} overflows a 390px screen by {overflow}px"
        body = page.evaluate("document.body.scrollWidth - document.body.clientWidth")
        assert body <= 0, f"{url} body overflows by {body}px"

    page.goto("/recipes/")
    page.screenshot(path=tmp_path / "list-phone.png", full_page=False)
    page.goto(f"/recipes/{KUBEFLOW}/")
    page.screenshot(path=tmp_path / "detail-phone.png", full_page=False)
    print(f"phone screenshots in {tmp_path}")


def test_it_takes_screenshots_to_review_the_design(page, catalog, tmp_path):
    page.goto("/recipes/?service=eks")
    page.screenshot(path=tmp_path / "list.png", full_page=True)
    page.goto(f"/recipes/{KUBEFLOW}/")
    page.screenshot(path=tmp_path / "detail.png", full_page=True)
    for section in ("components", "checks"):
        page.locator(f"#{section}-h").scroll_into_view_if_needed()
        page.evaluate(f"document.getElementById('{section}-h').scrollIntoView()")
        page.screenshot(path=tmp_path / f"detail-{section}.png")

    assert (tmp_path / "list.png").stat().st_size > 0
    assert (tmp_path / "detail.png").stat().st_size > 0
    print(f"screenshots in {tmp_path}")
