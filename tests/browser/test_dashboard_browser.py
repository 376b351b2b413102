"""The home page and the recipe list in Chromium: matrix cell → list, sort with URL state and
history, layout at 1280 px (no inner scroll) and 390 px (no overflow, filters folded)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import expect

from evidence_app.corroborate import CONFIRMED
from evidence_app.services import keys
from evidence_app.services.ingest import evidence_ingest
from evidence_app.verification import verify_keyed
from recipes_app.models import Catalog, Recipe
from tests.evidence_factories import (
    EvidenceFactory,
    SignerFactory,
    example_statement,
    signed_example_tarball,
)
from tests.sigstore_private import generate_key, public_pem, sign_dsse_with_key

pytestmark = pytest.mark.browser

KUBEFLOW = "h100-eks-ubuntu-training-kubeflow"
ROWS = "#results td.recipe-name > a"
# Screenshots go to a temporary folder unless AICR_SCREENSHOTS names one (the README's are
# made with AICR_SCREENSHOTS=docs/screenshots).
SCREENSHOTS_ENV = "AICR_SCREENSHOTS"


def query_of(url: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(url).query)


def confirm(catalog: Catalog, name: str) -> Recipe:
    """Two counted signers pass every declared check of ``name``."""
    recipe = Recipe.objects.get(catalog=catalog, name=name)
    results = {
        phase: [{"name": check["name"], "status": "passed"} for check in checks]
        for phase, checks in recipe.checks.items()
        if phase != "readiness"
    }
    for signer in SignerFactory.create_batch(2):
        EvidenceFactory(recipe=recipe, signer=signer, check_results=results)
    return recipe


def overflow(page) -> int:  # type: ignore[no-untyped-def]
    return page.evaluate(
        "Math.max(document.documentElement.scrollWidth - document.documentElement.clientWidth,"
        " document.body.scrollWidth - document.body.clientWidth)"
    )


def errors(console) -> list[str]:  # type: ignore[no-untyped-def]
    return [m for m in console.messages if m.startswith(("error", "pageerror"))]


def test_a_matrix_cell_opens_its_filtered_list(page, catalog, console):
    confirm(catalog, KUBEFLOW)
    page.goto("/")
    cell = page.locator('[data-cell="eks/kubeflow/h100"]')
    expect(cell.locator(".state")).to_have_text(CONFIRMED)

    cell.click()

    expect(page).to_have_url(re.compile(r"/recipes/\?"))
    assert query_of(page.url) == {
        "service": ["eks"],
        "accelerator": ["h100"],
        "platform": ["kubeflow"],
    }
    expected = sorted(
        Recipe.objects.filter(
            catalog=catalog, service="eks", accelerator="h100", platform="kubeflow"
        ).values_list("name", flat=True)
    )
    assert sorted(page.locator(ROWS).all_inner_texts()) == expected
    expect(page.locator("#f-service")).to_have_value("eks")
    assert errors(console) == []


def test_sorting_keeps_the_url_and_follows_back_and_forward(page, catalog, console):
    confirm(catalog, KUBEFLOW)
    by_name = sorted(Recipe.objects.filter(catalog=catalog).values_list("name", flat=True))
    page.goto("/recipes/")
    page.evaluate("window.__notReloaded = true")
    expect(page.locator(ROWS).first).to_have_text(KUBEFLOW)  # by state by default

    page.select_option("#f-sort", "name")
    expect(page).to_have_url(re.compile(r"/recipes/\?sort=name$"))
    expect(page.locator(ROWS).first).to_have_text(by_name[0])
    page.select_option("#f-sort", "attested")
    expect(page).to_have_url(re.compile(r"\?sort=attested$"))
    expect(page.locator(ROWS).first).to_have_text(KUBEFLOW)
    page.select_option("#f-service", "gke")
    expect(page).to_have_url(re.compile(r"\?service=gke&sort=attested$"))
    gke = sorted(
        Recipe.objects.filter(catalog=catalog, service="gke").values_list("name", flat=True)
    )
    expect(page.locator(ROWS).first).to_have_text(gke[0])  # nothing attested: by name

    page.go_back()
    expect(page).to_have_url(re.compile(r"\?sort=attested$"))
    expect(page.locator("#f-sort")).to_have_value("attested")
    expect(page.locator(ROWS).first).to_have_text(KUBEFLOW)
    page.go_back()
    expect(page).to_have_url(re.compile(r"\?sort=name$"))
    expect(page.locator("#f-sort")).to_have_value("name")
    expect(page.locator(ROWS).first).to_have_text(by_name[0])
    page.go_forward()
    expect(page).to_have_url(re.compile(r"\?sort=attested$"))
    expect(page.locator(ROWS).first).to_have_text(KUBEFLOW)
    page.go_forward()
    expect(page).to_have_url(re.compile(r"\?service=gke&sort=attested$"))
    expect(page.locator("#f-service")).to_have_value("gke")
    assert page.evaluate("window.__notReloaded") is True
    assert errors(console) == []


def test_the_recipe_table_fits_1280_px_without_an_inner_scroll(page, catalog):
    page.goto("/recipes/")

    table = page.locator(".recipes-table")
    box = table.bounding_box()
    assert box is not None
    assert box["x"] >= 0
    assert box["x"] + box["width"] <= 1280
    assert page.locator("#results .table-scroll").count() == 0
    assert overflow(page) <= 0
    # Every column's header is on screen.
    for header in page.locator(".recipes-table thead th").all():
        head = header.bounding_box()
        assert head is not None
        assert head["x"] + head["width"] <= 1280, header.inner_text()


def test_on_a_phone_pages_fit_and_the_filters_fold_behind_one_button(open_page, catalog, console):
    confirm(catalog, KUBEFLOW)
    page = open_page(viewport={"width": 390, "height": 844}, device_scale_factor=2)
    for url in ("/", "/recipes/", "/recipes/?sort=state", "/signers/"):
        page.goto(url)
        assert overflow(page) <= 0, url

    page.goto("/recipes/")
    toggle = page.get_by_role("button", name="Filters")
    expect(toggle).to_be_visible()
    expect(page.locator("#f-service")).to_be_hidden()
    expect(toggle).to_have_attribute("aria-expanded", "false")
    toggle.click()
    expect(page.locator("#f-service")).to_be_visible()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    page.select_option("#f-service", "eks")
    expect(page).to_have_url(re.compile(r"\?service=eks$"))
    expect(page.get_by_role("button", name="Filters (1)")).to_be_visible()
    page.get_by_role("button", name="Filters (1)").click()
    expect(page.locator("#f-service")).to_be_hidden()
    # The list is a card per recipe: the first recipe starts on the first screen.
    first = page.locator(ROWS).first.bounding_box()
    assert first is not None
    assert first["y"] < 844
    assert overflow(page) <= 0
    assert errors(console) == []


def test_screenshots_of_the_main_pages(open_page, catalog, tmp_path):
    """Desktop (1280 x 900) and phone (390 x 844) screenshots for the README."""
    confirm(catalog, KUBEFLOW)
    folder = Path(os.environ.get(SCREENSHOTS_ENV) or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    pages = {
        "home": "/",
        "recipes": "/recipes/",
        "recipe": f"/recipes/{KUBEFLOW}/",
        "signers": "/signers/",
    }
    for size, viewport in (("desktop", (1280, 900)), ("phone", (390, 844))):
        page = open_page(viewport={"width": viewport[0], "height": viewport[1]})
        for name, url in pages.items():
            page.goto(url)
            path = folder / f"{name}-{size}.png"
            page.screenshot(path=path)
            assert path.stat().st_size > 10_000, path


@pytest.mark.parametrize("viewport", [(1280, 900), (390, 844)])
def test_every_consensus_grid_row_is_reachable_without_an_inner_scroll(
    open_page, catalog, viewport
):
    recipe = confirm(catalog, KUBEFLOW)
    page = open_page(viewport={"width": viewport[0], "height": viewport[1]})
    page.goto(f"/recipes/{KUBEFLOW}/")

    box = page.locator(".grid-scroll")
    assert box.evaluate("e => e.scrollHeight - e.clientHeight") <= 1  # no vertical inner scroll
    legend = page.locator("#consensus .legend").bounding_box()
    grid = box.bounding_box()
    assert legend is not None
    assert grid is not None
    assert legend["y"] < grid["y"]  # the legend is read first
    rows = page.locator(".check-row[data-check]")
    declared = sum(len(checks) for phase, checks in recipe.checks.items() if phase != "readiness")
    expect(rows).to_have_count(declared)
    last = rows.last
    last.scroll_into_view_if_needed()
    expect(last).to_be_in_viewport()
    assert overflow(page) <= 0


def test_key_download_then_the_page_commands_verify_from_a_fresh_shell(
    page, catalog, live_server, tmp_path, console
):
    """Download key.pub from /signers/, then run the evidence page's fetch lines in an empty
    directory (curl against the live server, tar), and verify what they fetched. cosign is
    not installed here, so the last step is this site's own offline verifier reading exactly
    the files the cosign command names (key.pub, summary-bundle/attestation.intoto.jsonl,
    summary-bundle/recipe.yaml)."""
    key = generate_key("ecdsa-p256")
    pem = public_pem(key)
    keys.signing_key_register(name="lab key", public_key_pem=pem)
    data = signed_example_tarball(sign_dsse_with_key(example_statement(), key))
    result = evidence_ingest(
        data=data, artifact=None, filename="evidence.tar.gz", user=None, channel="api"
    )
    assert result.verdict == "verified", result.reason
    evidence = result.evidence

    page.goto("/signers/")
    with page.expect_download() as download:
        page.locator(f'[data-signer="{evidence.signer.slug}"] a[download]').click()
    saved = tmp_path / "downloaded-key.pub"
    download.value.save_as(saved)
    assert saved.read_bytes() == (pem if isinstance(pem, bytes) else pem.encode())

    page.goto(f"/evidence/{evidence.pk}/")
    script = page.locator("#fetch-command").inner_text()
    cosign = next(
        text
        for text in page.locator(".command pre code").all_inner_texts()
        if text.startswith("cosign ")
    )
    shell = tmp_path / "fresh"
    shell.mkdir()
    run = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=shell,
        env={"PATH": "/usr/bin:/bin", "HOME": str(shell)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert live_server.url.startswith("http://localhost") or "127.0.0.1" in live_server.url
    argv = shlex.split(cosign)
    named = {argv[i]: argv[i + 1] for i in range(len(argv) - 1) if argv[i].startswith("--")}
    bundle = (shell / named["--bundle"]).read_bytes()
    artifact = (shell / argv[-1]).read_bytes()
    public = (shell / named["--key"]).read_bytes()
    outcome = verify_keyed(bundle, public_keys=[public], artifact=artifact)
    assert outcome.status == "ok", outcome.detail
    tampered = verify_keyed(bundle, public_keys=[public], artifact=artifact + b"\n# edited")
    assert tampered.status == "invalid"
    assert errors(console) == []


def test_the_badge_renders_its_markdown_copies_and_the_feed_parses(page, catalog, console):
    confirm(catalog, KUBEFLOW)
    page.goto(f"/recipes/{KUBEFLOW}/")
    image = page.locator("img[data-badge]")
    image.scroll_into_view_if_needed()
    expect(image).to_be_visible()
    page.wait_for_function("document.querySelector('img[data-badge]').complete")
    assert image.evaluate("img => img.naturalWidth") > 100

    page.get_by_role("button", name="Copy Markdown of the badge").click()
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied == page.locator("#badge-markdown").inner_text()
    assert copied.startswith(f"[![AICR consensus: {KUBEFLOW}](")

    response = page.request.get("/feeds/evidence.atom?service=eks")
    assert response.status == 200
    root = ET.fromstring(response.body())  # noqa: S314 (this site's own output, in a test)
    titles = [e.findtext("{http://www.w3.org/2005/Atom}title") for e in root]
    assert sum(1 for t in titles if t and t.startswith(f"new: {KUBEFLOW}")) == 2
    assert errors(console) == []


def test_the_yaml_loads_when_opened_and_copies_exactly(page, catalog, console):
    recipe = Recipe.objects.get(catalog=catalog, name=KUBEFLOW)
    yaml_requests: list[str] = []
    page.on("request", lambda r: yaml_requests.append(r.url) if "recipe.yaml" in r.url else None)
    page.goto(f"/recipes/{KUBEFLOW}/")
    copy = page.locator('[data-copy="#recipe-yaml"]')  # inside the closed <details>
    expect(copy).to_be_disabled()
    assert yaml_requests == []  # not loaded with the page: most of its weight, few read it

    page.locator("details.yaml summary").click()
    expect(copy).to_be_enabled()
    assert len(yaml_requests) == 1
    assert page.locator("#recipe-yaml").text_content() == recipe.deterministic_yaml
    copy.click()
    copied = page.evaluate("navigator.clipboard.readText()")
    # The copy button copies the trimmed text (a YAML document without its final newline).
    assert copied == recipe.deterministic_yaml.strip()
    assert errors(console) == []


def luminance(css_colour: str) -> float:
    """Relative luminance (WCAG) of an ``rgb(r, g, b)`` computed colour."""
    channels = [int(c) / 255 for c in re.findall(r"\d+", css_colour)[:3]]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    light, dark = sorted((luminance(a), luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def test_dark_mode_and_reduced_motion_follow_the_system(open_page, catalog, tmp_path):
    confirm(catalog, KUBEFLOW)
    page = open_page(
        viewport={"width": 1280, "height": 900}, color_scheme="dark", reduced_motion="reduce"
    )
    folder = Path(os.environ.get(SCREENSHOTS_ENV) or tmp_path)
    for name, url in (("home", "/"), ("recipe", f"/recipes/{KUBEFLOW}/")):
        page.goto(url)
        body = page.evaluate("(s => [s.backgroundColor, s.color])(getComputedStyle(document.body))")
        assert luminance(body[0]) < 0.05, body  # a dark page
        assert contrast(*body) >= 7, body
        # Text on the darkened surfaces (cards, table heads, grid phase rows) stays readable.
        for selector in (".card", ".table thead th", ".phase-row th"):
            if page.locator(selector).count():
                colours = page.locator(selector).first.evaluate(
                    "e => { const s = getComputedStyle(e); let b = s.backgroundColor, n = e;"
                    " while (b === 'rgba(0, 0, 0, 0)' && n.parentElement) {"
                    " n = n.parentElement; b = getComputedStyle(n).backgroundColor; }"
                    " return [b, s.color]; }"
                )
                assert contrast(*colours) >= 4.5, (url, selector, colours)
        page.screenshot(path=folder / f"{name}-dark.png")
    assert page.evaluate(
        "getComputedStyle(document.querySelector('.spinner') || document.body).animationName"
    ) in ("none", "")
