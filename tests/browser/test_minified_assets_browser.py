"""Production serves this site's CSS and JavaScript minified (aicr_site/static_storage.py), while
the live server of the other browser tests serves the sources. Here the same pages load the
minified bytes instead (each request for one of this site's own files is answered with what
``collectstatic`` writes) and must look the same, pixel for pixel, and behave the same."""

from __future__ import annotations

import base64
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from playwright.sync_api import expect

from aicr_site.static_storage import minified
from recipes_app.models import Recipe
from tests.browser.test_dashboard_browser import KUBEFLOW, confirm, errors

pytestmark = pytest.mark.browser

SOURCE = Path(settings.BASE_DIR) / "static"
TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}


def serve_minified(page) -> list[str]:  # type: ignore[no-untyped-def]
    """Answer this site's own static CSS and JavaScript with their minified bytes."""
    served: list[str] = []

    def handle(route) -> None:  # type: ignore[no-untyped-def]
        name = urlsplit(route.request.url).path.removeprefix("/static/")
        small = minified(name, (SOURCE / name).read_text()) if (SOURCE / name).is_file() else None
        if small is None:
            route.continue_()
            return
        served.append(name)
        route.fulfill(status=200, body=small, content_type=TYPES[Path(name).suffix])

    page.route("**/static/**", handle)
    return served


SHOT = {"full_page": True, "animations": "disabled", "caret": "hide"}


def settled_screenshot(page) -> bytes:  # type: ignore[no-untyped-def]
    """The page's picture once two in a row agree. One CI run's two pictures of a page differed
    and the difference could not be reproduced (six runs, three of them on a saturated CPU); a
    frame still drawn after ``networkidle`` is the likely cause, not a proven one. A difference
    the minified assets really make survives the settling and still fails the test."""
    picture = page.screenshot(**SHOT)
    for _ in range(10):
        page.wait_for_timeout(150)
        again = page.screenshot(**SHOT)
        if again == picture:
            break
        picture = again
    return picture


# The most pixels two pictures may differ in and still count as the same page. Under load, CI's
# Chromium once drew 8 pixels of the header's text antialiased differently in two pictures of
# the same page (rows 10-11 and 30-32, two columns wide), after settling. A minified rule that
# really changed something moves or recolours far more than this: a line of text is thousands.
MAX_DIFFERENT_PIXELS = 64
COUNT_DIFFERENT_PIXELS = """async ([a, b]) => {
  const load = async (src) => { const i = new Image(); i.src = src; await i.decode(); return i; };
  const [one, two] = [await load(a), await load(b)];
  if (one.width !== two.width || one.height !== two.height) return -1;
  const pixels = (img) => {
    const c = document.createElement("canvas");
    c.width = img.width; c.height = img.height;
    const g = c.getContext("2d"); g.drawImage(img, 0, 0);
    return g.getImageData(0, 0, img.width, img.height).data;
  };
  const [p, q] = [pixels(one), pixels(two)];
  let different = 0;
  for (let i = 0; i < p.length; i += 4) {
    if (p[i] !== q[i] || p[i + 1] !== q[i + 1] || p[i + 2] !== q[i + 2]) different++;
  }
  return different;
}"""


def different_pixels(page, one: bytes, two: bytes) -> int:  # type: ignore[no-untyped-def]
    """How many pixels two PNGs differ in (-1: not the same size), counted by the browser."""
    if one == two:
        return 0
    urls = [f"data:image/png;base64,{base64.b64encode(png).decode()}" for png in (one, two)]
    return int(page.evaluate(COUNT_DIFFERENT_PIXELS, urls))


@pytest.mark.parametrize("width", [1280, 390])
def test_pages_look_the_same_on_the_minified_assets(open_page, catalog, width, tmp_path):
    confirm(catalog, KUBEFLOW)
    urls = ["/", "/recipes/", f"/recipes/{KUBEFLOW}/", f"/recipes/{KUBEFLOW}/history/"]
    options = {"viewport": {"width": width, "height": 900}, "reduced_motion": "reduce"}
    sources, small = open_page(**options), open_page(**options)
    served = serve_minified(small)
    for url in urls:
        sources.goto(url)
        small.goto(url)
        for view in (sources, small):
            view.wait_for_load_state("networkidle")
        expected, seen = settled_screenshot(sources), settled_screenshot(small)
        different = different_pixels(sources, expected, seen)
        if different:  # keep both pictures for whoever reads the failure
            stem = url.strip("/").replace("/", "_") or "home"
            (tmp_path / f"{stem}-sources.png").write_bytes(expected)
            (tmp_path / f"{stem}-minified.png").write_bytes(seen)
        assert 0 <= different <= MAX_DIFFERENT_PIXELS, (
            f"{url} looks different on the minified assets ({different} pixels; -1: another "
            f"size): both pictures in {tmp_path}"
        )
    assert {"css/base.css", "css/recipe.css", "js/site.js", "js/recipe.js"} <= set(served)


def test_the_minified_scripts_load_the_yaml_copy_it_and_fold_the_filters(
    open_page, catalog, console
):
    recipe = Recipe.objects.get(catalog=catalog, name=KUBEFLOW)
    page = open_page(
        viewport={"width": 390, "height": 844}, permissions=["clipboard-read", "clipboard-write"]
    )
    served = serve_minified(page)

    page.goto(f"/recipes/{KUBEFLOW}/")
    page.locator("details.yaml summary").click()
    copy = page.get_by_role("button", name="Copy YAML of the recipe")
    expect(copy).to_be_enabled()
    copy.click()
    assert page.evaluate("navigator.clipboard.readText()") == recipe.deterministic_yaml.strip()

    page.goto("/recipes/")
    facets = page.locator("#facets")
    expect(facets).to_be_hidden()
    page.get_by_role("button", name="Filters").click()
    expect(facets).to_be_visible()

    assert {"js/site.js", "js/recipe.js"} <= set(served)
    assert errors(console) == []


def test_the_pixel_count_tells_another_page_from_the_same(open_page, catalog):
    """The tolerance above cannot hide a real change: two different pages of the same size
    differ in far more pixels than it allows, a page and itself in none."""
    page = open_page(viewport={"width": 390, "height": 900}, reduced_motion="reduce")
    page.goto("/")
    page.wait_for_load_state("networkidle")
    home = page.screenshot(animations="disabled", caret="hide")
    page.goto("/recipes/")
    page.wait_for_load_state("networkidle")
    recipes = page.screenshot(animations="disabled", caret="hide")
    assert different_pixels(page, home, home) == 0
    assert different_pixels(page, home, recipes) > 100 * MAX_DIFFERENT_PIXELS
