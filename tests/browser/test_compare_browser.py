"""In Chromium: comparing two records (picked from the evidence page), upload with
post/redirect/get (reload and back never send the file again), the consensus grid's signer
header and check column staying in view, the per-check list on a phone, and the copy
buttons. Every page here: no console error, no request leaving loopback, no horizontal
overflow at 390 px."""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone
from playwright.sync_api import expect

from evidence_app.models import Evidence, Role, UploadLog
from evidence_app.services import keys
from recipes_app.models import Recipe
from tests.browser.test_dashboard_browser import errors, overflow
from tests.evidence_factories import (
    EvidenceFactory,
    SignerFactory,
    example_statement,
    signed_example_tarball,
)
from tests.sigstore_private import generate_key, public_pem, sign_dsse_with_key

pytestmark = pytest.mark.browser

KUBEFLOW = "h100-eks-ubuntu-training-kubeflow"
PASSWORD = "pw-for-browser-tests-1"
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    """The README's screenshots with AICR_SCREENSHOTS=docs/screenshots, else a tmp folder."""
    folder = Path(os.environ.get("AICR_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def watch(page) -> list[str]:  # type: ignore[no-untyped-def]
    """Every URL the page requests (to check none leaves loopback)."""
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    return requested


def off_loopback(requested: list[str]) -> list[str]:
    return [
        url
        for url in requested
        if not url.startswith("data:") and urlsplit(url).hostname not in LOOPBACK
    ]


def every_check_passed(recipe: Recipe, *, failing: str = "") -> dict[str, list[dict[str, str]]]:
    return {
        phase: [
            {"name": c["name"], "status": "failed" if c["name"] == failing else "passed"}
            for c in checks
        ]
        for phase, checks in recipe.checks.items()
        if phase != "readiness"
    }


def many_signers(catalog, count: int) -> tuple[Recipe, list[Evidence]]:  # type: ignore[no-untyped-def]
    recipe = Recipe.objects.get(catalog=catalog, name=KUBEFLOW)
    now = timezone.now()
    records = [
        EvidenceFactory(
            recipe=recipe,
            signer=SignerFactory(label=f"lab-{i:02d}/gpu-cluster"),
            attested_at=now - timedelta(hours=i),
            k8s_version=f"1.33.{i}",
            check_results=every_check_passed(recipe, failing="operator-health" if i else ""),
        )
        for i in range(count)
    ]
    return recipe, records


# --- compare ---------------------------------------------------------------------------------


def test_it_compares_a_record_with_one_picked_on_its_page(open_page, catalog, console, shots):  # type: ignore[no-untyped-def]
    recipe, (newest, older, *_) = many_signers(catalog, 3)
    Evidence.objects.filter(pk=older.pk).update(
        withdrawn_at=timezone.now(), withdrawal_reason="wrong cluster"
    )
    page = open_page(viewport=DESKTOP)
    requested = watch(page)
    page.goto(f"/evidence/{newest.pk}/")

    page.select_option("#compare-with", str(older.pk))
    page.get_by_role("button", name="Compare", exact=True).click()

    expect(page).to_have_url(re.compile(rf"/evidence/compare/\?a={newest.pk}&b={older.pk}$"))
    expect(page.locator("h1")).to_contain_text(recipe.name)
    different = page.locator("tr.is-different")
    marked = [" ".join(t.split()) for t in different.locator("th").all_inner_texts()]
    assert "deployment operator-health" in marked  # passed in A, failed in B
    expect(different.first.locator(".diff-mark")).to_have_text("≠ differs")
    expect(page.locator(".compare-table").first).to_contain_text("WITHDRAWN")
    page.screenshot(path=shots / "compare-desktop.png", full_page=False)

    phone = open_page(viewport=PHONE)
    requested += watch(phone)
    phone.goto(page.url)
    expect(phone.locator("tr.is-different").first).to_be_visible()
    assert overflow(phone) <= 0
    phone.screenshot(path=shots / "compare-phone.png")
    other = EvidenceFactory(recipe=Recipe.objects.filter(catalog=catalog).exclude(pk=recipe.pk)[0])
    refused = phone.goto(f"/evidence/compare/?a={newest.pk}&b={other.pk}")
    assert refused is not None
    assert refused.status == 400
    expect(phone.locator(".compare-error")).to_contain_text("only records of one recipe")
    assert overflow(phone) <= 0
    assert off_loopback(requested) == []
    assert [e for e in errors(console) if "400" not in e] == []


# --- upload, post/redirect/get ----------------------------------------------------------------


def sign_in(page, django_user_model) -> None:  # type: ignore[no-untyped-def]
    user = django_user_model.objects.create_user(username="alice", password=PASSWORD)
    user.groups.add(Group.objects.get_or_create(name=Role.CONTRIBUTOR)[0])
    page.goto("/accounts/login/?next=/evidence/new/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    expect(page).to_have_url(re.compile(r"/evidence/new/$"))


def test_a_valid_upload_lands_on_its_result_and_reload_sends_nothing(  # type: ignore[no-untyped-def]
    page, catalog, django_user_model, tmp_path, console
):
    key = generate_key("ecdsa-p256")
    keys.signing_key_register(name="lab key", public_key_pem=public_pem(key))
    bundle = tmp_path / "evidence.tar.gz"
    bundle.write_bytes(signed_example_tarball(sign_dsse_with_key(example_statement(), key)))
    requested = watch(page)
    sign_in(page, django_user_model)

    page.set_input_files("#id_bundle", str(bundle))
    page.click("button:text('Verify and upload')")

    expect(page).to_have_url(re.compile(r"/evidence/uploads/\d+/$"))
    expect(page.locator("h1")).to_have_text("Verified and stored")
    evidence = Evidence.objects.get()
    expect(page.locator(f'a[href="/evidence/{evidence.pk}/"]').first).to_be_visible()
    result_url = page.url
    posts = [r for r in requested if "/evidence/new/" in r]

    page.reload()
    expect(page.locator("h1")).to_have_text("Verified and stored")
    page.go_back()
    expect(page).to_have_url(re.compile(r"/evidence/new/$"))
    expect(page.locator("#id_bundle")).to_be_visible()
    page.go_forward()
    expect(page).to_have_url(result_url)

    assert UploadLog.objects.count() == 1  # neither the reload nor back/forward re-sent it
    assert Evidence.objects.count() == 1
    assert [r for r in requested if "/evidence/new/" in r] == [*posts, posts[-1]]  # back: a GET
    assert off_loopback(requested) == []
    assert errors(console) == []


def test_an_invalid_upload_says_why_at_once_and_a_refused_one_names_its_step(  # type: ignore[no-untyped-def]
    open_page, catalog, django_user_model, console
):
    page = open_page(viewport=PHONE)
    requested = watch(page)
    sign_in(page, django_user_model)

    page.fill("#id_oci_ref", "ghcr.io/acme/evidence:latest")
    page.click("button:text('Verify and upload')")

    expect(page).to_have_url(re.compile(r"/evidence/new/$"))  # the form again, with the error
    expect(page.locator(".field-error").first).to_be_visible()
    expect(page.locator("#id_oci_ref")).to_have_value("ghcr.io/acme/evidence:latest")
    assert UploadLog.objects.count() == 0
    assert overflow(page) <= 0

    page.fill("#id_oci_ref", "")
    page.set_input_files(
        "#id_bundle", files=[{"name": "e.json", "mimeType": "application/json", "buffer": b"{}"}]
    )
    page.click("button:text('Verify and upload')")

    expect(page).to_have_url(re.compile(r"/evidence/uploads/\d+/$"))
    expect(page.locator("h1")).to_contain_text("Not accepted")
    expect(page.locator(".alert--error")).to_contain_text("at step parse")
    page.reload()
    expect(page.locator("h1")).to_contain_text("Not accepted")
    assert UploadLog.objects.count() == 1
    assert overflow(page) <= 0
    assert off_loopback(requested) == []
    # The invalid form answers 400 (Chromium logs the status as a console error).
    assert [e for e in errors(console) if "400" not in e] == []


# --- the consensus grid ------------------------------------------------------------------------


def test_the_signer_header_and_check_column_stay_in_view(page, catalog, console):  # type: ignore[no-untyped-def]
    many_signers(catalog, 14)
    requested = watch(page)
    page.goto(f"/recipes/{KUBEFLOW}/")
    rows = page.locator("#consensus tr.check-row")
    header = page.locator("#consensus thead th.signer-col").first
    expect(header).to_be_visible()

    rows.nth(rows.count() // 2).scroll_into_view_if_needed()
    page.mouse.wheel(0, 200)
    page.wait_for_timeout(100)  # one animation frame for recipe.js
    table_top = page.locator(".consensus-grid").bounding_box()
    head = header.bounding_box()
    assert table_top is not None
    assert head is not None
    assert table_top["y"] < -100  # the table's top has scrolled off the screen…
    assert -1 <= head["y"] <= 2  # …and its header sits at the top of the viewport
    hit = page.evaluate(
        "([x, y]) => document.elementFromPoint(x, y).closest('th')?.className || ''",
        [head["x"] + 20, head["y"] + 10],
    )
    assert "signer-col" in hit  # on top of the rows, not under them

    box = page.locator(".grid-scroll")
    assert box.evaluate("e => e.scrollWidth > e.clientWidth")  # the shown signer columns scroll
    check = page.locator("#consensus tbody th.consensus-grid__check").nth(rows.count() // 2)
    before = check.bounding_box()
    box.evaluate("e => { e.scrollLeft = 600; }")
    after = check.bounding_box()
    assert before is not None
    assert after is not None
    assert abs(after["x"] - before["x"]) < 1  # the check column stays
    assert off_loopback(requested) == []
    assert errors(console) == []


def test_a_phone_gets_a_per_check_list(open_page, catalog, console, shots):  # type: ignore[no-untyped-def]
    _, records = many_signers(catalog, 3)
    page = open_page(viewport=PHONE)
    requested = watch(page)
    page.goto(f"/recipes/{KUBEFLOW}/")

    expect(page.locator(".consensus-grid thead")).to_be_hidden()
    row = page.locator('#consensus tr[data-check="deployment/operator-health"]')
    expect(row).to_be_visible()
    expect(row.locator(".consensus-grid__state .state")).to_have_text("CONTESTED")
    lines = row.locator("td.cell").evaluate_all(
        "cells => cells.map(c => getComputedStyle(c, '::before').content + c.textContent)"
    )
    assert sorted(lines) == sorted(
        [
            f'"{e.signer.label}: {"✓" if i == 0 else "✗"} "{"pass" if i == 0 else "fail"}'
            for i, e in enumerate(records)
        ]
    )
    cells = row.locator("td.cell").all()
    first, second = cells[0].bounding_box(), cells[1].bounding_box()
    assert first is not None
    assert second is not None
    assert second["y"] > first["y"]  # one signer a line, not side by side
    assert overflow(page) <= 0
    page.locator(".legend").scroll_into_view_if_needed()
    page.evaluate(
        "window.scrollBy(0, document.querySelector('.legend').getBoundingClientRect().top - 8)"
    )
    page.screenshot(path=shots / "recipe-phone-checks.png")
    assert off_loopback(requested) == []
    assert errors(console) == []


def test_the_recipe_digest_copy_button_copies_it_exactly(page, catalog, console):  # type: ignore[no-untyped-def]
    recipe = Recipe.objects.get(catalog=catalog, name=KUBEFLOW)
    page.goto(f"/recipes/{KUBEFLOW}/")

    page.get_by_role("button", name="Copy recipe digest").click()

    assert page.evaluate("navigator.clipboard.readText()") == recipe.digest
    assert errors(console) == []
