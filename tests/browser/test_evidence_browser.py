"""The consensus grid and the evidence pages in a real browser: the AICR-version lens swapped in
place, drag-and-drop upload, copy buttons, hostile strings, phone layout, strict CSP.

Screenshots go to ``$EVIDENCE_SCREENSHOTS`` (default: the test's tmp_path) for review.
"""

from __future__ import annotations

import os
import re
import shlex
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone
from playwright.sync_api import expect

from evidence_app.models import Role
from recipes_app.models import Recipe
from tests.evidence_factories import EXAMPLE_RECIPE, EvidenceFactory, SignerFactory

pytestmark = pytest.mark.browser

HOSTILE = "<img src=x onerror=alert(1)>\"'; rm -rf ~ $(id)"
LONG = "W" * 4096
PASSWORD = "pw-for-browser-tests-1"


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("EVIDENCE_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def recipe(catalog) -> Recipe:  # type: ignore[no-untyped-def]
    return Recipe.objects.get(catalog=catalog, name=EXAMPLE_RECIPE)


def no_dialogs(page) -> list[str]:  # type: ignore[no-untyped-def]
    """Fail on any alert(): a hostile string that ran would open one."""
    opened: list[str] = []

    def dismiss(dialog) -> None:  # type: ignore[no-untyped-def]
        opened.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", dismiss)
    return opened


def two_versions(recipe: Recipe) -> None:
    now = timezone.now()
    nvidia = SignerFactory(label="NVIDIA UAT", signer_class="first-party")
    acme = SignerFactory(label="acme/gpu-lab")
    stranger = SignerFactory(label="stranger/fork", counted=False, signer_class="reported")

    def run(signer, version, days, **statuses):  # type: ignore[no-untyped-def]
        EvidenceFactory(
            recipe=recipe,
            signer=signer,
            aicr_version=version,
            attested_at=now - timedelta(days=days),
            check_results={
                "deployment": {k.replace("_", "-"): {"status": v} for k, v in statuses.items()},
                "performance": {
                    "nccl-all-reduce-bw": {
                        "status": "passed",
                        "metrics": [{"label": "Bus bandwidth", "value": 412.5, "unit": "GB/s"}],
                    }
                },
            },
        )

    run(nvidia, "v0.14.0", 12, operator_health="passed", expected_resources="passed")
    run(acme, "v0.14.0", 11, operator_health="passed", expected_resources="passed")
    run(nvidia, "v1.0.0", 2, operator_health="failed", expected_resources="passed")
    run(stranger, "v1.0.0", 1, operator_health="passed")
    EvidenceFactory(recipe=recipe, is_simulated=True, check_results={}, aicr_version="v1.0.0")
    EvidenceFactory(
        recipe=recipe,
        is_demo=True,
        attested_at=now - timedelta(days=40),
        withdrawn_at=now,
        withdrawal_reason="ran against the wrong cluster",
        check_results={"deployment": {"operator-health": {"status": "failed"}}},
    )


def row_state(page, check: str) -> str:  # type: ignore[no-untyped-def]
    return page.locator(f'#consensus tr[data-check="{check}"]').get_attribute("data-state")


def test_it_switches_the_aicr_version_lens_and_back(page, recipe, shots):  # type: ignore[no-untyped-def]
    two_versions(recipe)
    page.goto(f"/recipes/{recipe.name}/")

    expect(page.locator("#consensus [data-recipe-state]")).to_have_text("CONTESTED")
    assert row_state(page, "deployment/operator-health") == "CONTESTED"
    expect(page.locator("#consensus th.signer-col")).to_have_count(4)
    page.locator("#consensus").screenshot(path=shots / "grid-latest.png")

    # A plain GET form (the page has no htmx: its budget): the URL says the lens, the page
    # opens at the grid.
    page.select_option("#lens", "v0.14.0")
    page.locator(".lens-picker").get_by_role("button", name="Show").click()

    expect(page).to_have_url(re.compile(r"\?lens=v0\.14\.0#consensus$"))
    expect(page.locator("#consensus th.signer-col")).to_have_count(2)
    assert row_state(page, "deployment/operator-health") == "CONFIRMED"
    expect(page.locator("#lens")).to_have_value("v0.14.0")
    page.locator("#consensus").screenshot(path=shots / "grid-v0.14.0.png")

    page.go_back()

    expect(page).to_have_url(re.compile(rf"/recipes/{recipe.name}/$"))
    expect(page.locator("#consensus th.signer-col")).to_have_count(4)
    page.screenshot(path=shots / "recipe-page.png", full_page=True)


def test_the_list_shows_badges_and_filters_by_consensus(page, recipe, shots):  # type: ignore[no-untyped-def]
    two_versions(recipe)
    page.goto("/recipes/?sort=state")  # contested before the untested rest: on the first page

    badge = page.locator(f'tr:has(a:text-is("{recipe.name}")) td.consensus-cell')
    expect(badge).to_have_attribute("data-consensus", "CONTESTED")

    page.select_option("#f-consensus", "CONTESTED")

    expect(page).to_have_url(re.compile(r"consensus=CONTESTED"))
    expect(page.locator("#results td.recipe-name > a")).to_have_count(1)
    expect(page.locator("#results td.recipe-name > a")).to_have_text(recipe.name)
    page.screenshot(path=shots / "list-contested.png")


def sign_in(page, django_user_model, *, role: str, next_url: str):  # type: ignore[no-untyped-def]
    user = django_user_model.objects.create_user(username="alice", password=PASSWORD)
    user.groups.add(Group.objects.get_or_create(name=role)[0])
    page.goto(f"/accounts/login/?next={next_url}")
    page.fill("#id_username", "alice")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    expect(page).to_have_url(re.compile(re.escape(next_url) + "$"))
    page.wait_for_load_state("load")  # the URL changes before the page's deferred scripts run
    return user


def test_it_uploads_a_dropped_file(page, catalog, django_user_model, shots):  # type: ignore[no-untyped-def]
    dialogs = no_dialogs(page)
    sign_in(page, django_user_model, role=Role.CONTRIBUTOR, next_url="/evidence/new/")

    page.evaluate(
        """(name) => {
            const dt = new DataTransfer();
            dt.items.add(new File(['{"not": "a bundle"}'], name, {type: "application/json"}));
            const zone = document.querySelector("[data-dropzone]");
            const init = {dataTransfer: dt, bubbles: true, cancelable: true};
            for (const type of ["dragenter", "dragover"]) {
                zone.dispatchEvent(new DragEvent(type, init));
            }
            window.__dragover = zone.classList.contains("is-dragover");
            zone.dispatchEvent(new DragEvent("drop", init));
        }""",
        HOSTILE + ".sigstore.json",
    )

    assert page.evaluate("window.__dragover") is True
    assert page.evaluate("document.querySelector('#id_bundle').files.length") == 1
    assert page.evaluate("document.querySelector('#id_bundle').files[0].name") == (
        HOSTILE + ".sigstore.json"
    )
    expect(page.locator("[data-dropzone-file]")).to_contain_text(HOSTILE + ".sigstore.json")
    expect(page.locator("[data-dropzone]")).not_to_have_class(re.compile("is-dragover"))
    page.screenshot(path=shots / "upload-dropped.png")

    page.click("button:text('Verify and upload')")

    expect(page.locator("h1")).to_contain_text("Not accepted")
    # Shown as text (Chromium sends the double quote of a file name as %22).
    expect(page.locator(".upload-filename")).to_contain_text("<img src=x onerror=alert(1)>")
    expect(page.locator(".upload-filename img")).to_have_count(0)
    expect(page.locator(".transcript__step--failed")).to_have_count(1)
    page.screenshot(path=shots / "upload-result.png", full_page=True)
    assert dialogs == []


def test_the_plain_file_input_works_without_javascript(open_page, catalog, django_user_model):  # type: ignore[no-untyped-def]
    page = open_page(java_script_enabled=False)
    sign_in(page, django_user_model, role=Role.CONTRIBUTOR, next_url="/evidence/new/")

    page.set_input_files(
        "#id_bundle", files=[{"name": "e.json", "mimeType": "application/json", "buffer": b"{}"}]
    )
    page.click("button:text('Verify and upload')")

    expect(page.locator("h1")).to_contain_text("Not accepted")


def test_it_copies_a_verify_command_that_keeps_a_hostile_identity_whole(page, recipe, shots):  # type: ignore[no-untyped-def]
    identity = "x'; rm -rf ~; echo '$(id)`id`"
    evidence = EvidenceFactory(
        recipe=recipe,
        signer=SignerFactory(identity=identity),
        check_results={"deployment": {"operator-health": {"status": "passed"}}},
    )
    dialogs = no_dialogs(page)
    page.goto(f"/evidence/{evidence.pk}/")

    page.click("button[data-copy='#verify-command-2']")

    expect(page.locator("button[data-copy='#verify-command-2']")).to_have_text("Copied")
    copied = page.evaluate("navigator.clipboard.readText()")
    argv = shlex.split(copied)
    assert argv[:2] == ["cosign", "verify-blob-attestation"]
    assert argv[argv.index("--certificate-identity") + 1] == identity
    page.screenshot(path=shots / "evidence-page.png", full_page=True)
    assert dialogs == []


def page_overflow(page) -> tuple[int, list[str]]:  # type: ignore[no-untyped-def]
    """How far the page is wider than the window, and the elements sticking out."""
    return page.evaluate(
        """() => {
            const width = document.documentElement.clientWidth;
            const wide = [...document.querySelectorAll("body *")]
                .filter(e => e.getBoundingClientRect().right > width + 1)
                .filter(e => !e.closest(".table-scroll, pre, .diff-scroll"))
                .slice(0, 8)
                .map(e => `${e.tagName}.${e.className}`);
            return [document.documentElement.scrollWidth - width, wide];
        }"""
    )


def test_hostile_strings_wrap_and_never_run(open_page, recipe, shots):  # type: ignore[no-untyped-def]
    signer = SignerFactory(label=HOSTILE + LONG[:100], identity=(HOSTILE + LONG)[:4000])
    evidence = EvidenceFactory(
        recipe=recipe,
        signer=signer,
        aicr_version=(HOSTILE + LONG)[:100],
        k8s_version=(HOSTILE + LONG)[:100],
        check_results={"deployment": {HOSTILE + LONG: {"status": "passed", "message": LONG}}},
    )
    urls = (
        f"/evidence/{evidence.pk}/",
        f"/signers/{signer.slug}/",
        "/evidence/",
        f"/recipes/{recipe.name}/",
    )
    for width in (1280, 390):
        page = open_page(viewport={"width": width, "height": 900})
        dialogs = no_dialogs(page)
        for url in urls:
            page.goto(url)
            overflow, sticking_out = page_overflow(page)
            assert overflow <= 0, (url, width, overflow, sticking_out)
        expect(page.locator("#consensus code.check-name").first).to_be_visible()
        page.screenshot(path=shots / f"hostile-recipe-{width}.png")
        page.goto(urls[0])
        page.screenshot(path=shots / f"hostile-evidence-{width}.png")
        assert dialogs == []


def test_the_evidence_pages_have_no_csp_violations(page, recipe, console, shots):  # type: ignore[no-untyped-def]
    two_versions(recipe)
    evidence = recipe.evidence.first()
    for url in (
        "/evidence/",
        f"/evidence/{evidence.pk}/",
        f"/signers/{evidence.signer.slug}/",
        f"/recipes/{recipe.name}/",
        "/accounts/login/",
    ):
        page.goto(url)
        page.wait_for_load_state("networkidle")
    page.goto(f"/signers/{evidence.signer.slug}/")
    page.screenshot(path=shots / "signer-page.png", full_page=True)
    page.goto("/evidence/")
    page.screenshot(path=shots / "evidence-list.png", full_page=True)

    assert console.csp_violations() == []
    assert [m for m in console.messages if m.startswith(("error", "pageerror"))] == []


def test_a_signer_past_the_options_is_typed_with_suggestions(page, recipe, monkeypatch):  # type: ignore[no-untyped-def]
    """More signers than options: the typed field fetches its datalist as one types, and
    choosing a suggestion filters the list to that signer (no option silently missing)."""
    from evidence_app import list_filters

    monkeypatch.setitem(list_filters.MAX_OPTIONS, "signer", 1)
    for label in ("Alpha lab", "Beta lab", "Gamma cloud"):
        EvidenceFactory(recipe=recipe, signer=SignerFactory(label=label))
    gamma = SignerFactory(label="Gamma cloud two")
    EvidenceFactory(recipe=recipe, signer=gamma)
    page.goto("/evidence/")
    typed = page.locator('input[name="signer_other"]')
    expect(typed).to_have_attribute("placeholder", re.compile(r"or type any of \d+ more"))
    typed.press_sequentially("gamma cloud t")
    suggestions = page.locator("#ev-signer-values option")
    expect(suggestions).to_have_count(1)
    expect(suggestions.first).to_have_attribute("value", gamma.slug)
    typed.fill(gamma.slug)
    page.get_by_role("button", name="Show").click()
    expect(page).to_have_url(re.compile(r"signer_other="))
    expect(page.locator("#ev-signer option[selected]")).to_have_attribute("value", gamma.slug)
    expect(page.locator("#evidence-results tbody tr")).to_have_count(1)
