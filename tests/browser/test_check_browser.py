"""``/check/`` in a real browser: a pasted snapshot answered in place (htmx), an uploaded file
without JavaScript, a hostile snapshot shown as text, strict CSP, and criteria picked from the
catalog's choices after following a suggested completion."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from evidence_app.services import signers, trust_roots
from recipes_app.models import Recipe
from tests.evidence_app.coverage_data import as_yaml, full_snapshot, publish
from tests.evidence_factories import EXAMPLE_RECIPE

pytestmark = pytest.mark.browser


@pytest.fixture
def evidence(catalog) -> None:  # type: ignore[no-untyped-def]
    trust_roots.production_root_ensure()
    signers.seeded_allowlist_ensure()
    recipe = Recipe.objects.get(catalog=catalog, name=EXAMPLE_RECIPE)
    publish(recipe, full_snapshot(driver="570.86.15"))


def test_it_answers_a_pasted_snapshot_in_place(page, evidence):  # type: ignore[no-untyped-def]
    page.goto("/check/")
    page.evaluate("window.__notReloaded = true")
    page.fill("#id_snapshot_text", as_yaml(full_snapshot()))
    page.select_option("#id_intent", "training")
    page.select_option("#id_platform", "kubeflow")
    page.get_by_role("button", name="Check").click()

    expect(page.locator("[data-verdict]")).to_have_text(
        "Validated on a different tuple (GPU driver differs)."
    )
    expect(page.locator("#result")).to_contain_text("GPU driver 570.86.15 (yours 580.95.05)")
    assert page.evaluate("window.__notReloaded") is True


def test_it_shows_a_hostile_snapshot_as_text(page, evidence):  # type: ignore[no-untyped-def]
    opened: list[str] = []
    page.on("dialog", lambda dialog: (opened.append(dialog.message), dialog.dismiss()))
    page.goto("/check/")
    page.fill("#id_snapshot_text", "measurements: [{type: '<img src=x onerror=alert(1)>'}]")
    page.get_by_role("button", name="Check").click()

    expect(page.locator("[data-check-error]")).to_contain_text("<img src=x onerror=alert(1)>")
    assert opened == []


def test_it_works_without_javascript(open_page, evidence, tmp_path):  # type: ignore[no-untyped-def]
    page = open_page(java_script_enabled=False)
    snapshot = tmp_path / "snapshot.yaml"
    snapshot.write_text(as_yaml(full_snapshot(driver="570.86.15")))
    page.goto("/check/")
    page.set_input_files("#id_snapshot_file", str(snapshot))
    page.select_option("#id_intent", "training")
    page.select_option("#id_platform", "kubeflow")
    page.get_by_role("button", name="Check").click()

    expect(page.locator("[data-verdict]")).to_have_text(
        "Validated on this exact tuple by 1 signer."
    )


def test_it_follows_a_suggestion_and_picks_the_rest_from_the_choices(page, evidence):  # type: ignore[no-untyped-def]
    snapshot = as_yaml(full_snapshot())
    page.goto("/check/")
    page.fill("#id_snapshot_text", snapshot)
    page.get_by_role("button", name="Check").click()
    expect(page.locator("[data-verdict]")).to_contain_text("Not validated: no recipe applies")

    page.get_by_role("link", name="Check with intent=training").click()
    expect(page).to_have_url(
        re.compile(r"/check/\?service=eks&accelerator=h100&os=ubuntu&intent=training$")
    )
    expect(page.locator("#id_intent")).to_have_value("training")
    expect(page.locator("#id_service")).to_have_value("eks")
    page.select_option("#id_platform", "kubeflow")
    page.fill("#id_snapshot_text", snapshot)
    page.get_by_role("button", name="Check").click()

    expect(page.locator("[data-verdict]")).to_have_text(
        "Validated on a different tuple (GPU driver differs)."
    )
    expect(page.locator("[data-next-steps]")).to_contain_text(
        "aicr validate --recipe recipe.yaml --emit-attestation ./out"
    )
    page.get_by_role("link", name=EXAMPLE_RECIPE, exact=True).click()
    expect(page).to_have_url(re.compile(rf"/recipes/{EXAMPLE_RECIPE}/$"))
