"""Every HTML page through axe-core, in both colour schemes and at desktop and phone widths,
and no page wider than a 320 px phone.

The pages come from the URL conf, not from a hand-kept list: every named route is either in
``PAGES`` (how to build its path from the fixture objects) or in ``NOT_PAGES`` (why it answers
no HTML page). A route added later fails ``test_every_route_is_a_page_or_says_why_not`` until
it is placed, and once it is a page it is checked by axe like the rest.

axe-core is vendored (``tests/browser/vendor/``, see its README) and injected into each page;
the test fails on any *serious* or *critical* finding, naming the rule, the elements and the
page. Contexts bypass the site's CSP only so that the injected axe script may run; the CSP
itself is checked by the other browser tests.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.contrib.auth.models import Group
from django.urls import get_resolver
from playwright.sync_api import expect

from evidence_app.models import (
    ExportFormat,
    ExportJob,
    ExportState,
    Role,
    UploadLog,
    UploadOutcome,
)
from evidence_app.services import signers, trust_roots
from recipes_app.models import Catalog, Recipe
from tests.aicr_site.api_objects import ApiObjects, api_objects_make
from tests.aicr_site.test_request_guards import _route_names
from tests.evidence_app.coverage_data import as_yaml, full_snapshot, publish
from tests.evidence_factories import EXAMPLE_RECIPE, EvidenceFactory

pytestmark = pytest.mark.browser

AXE = Path(__file__).parent / "vendor" / "axe.min.js"
PASSWORD = "pw-for-a11y-tests-7"
BLOCKING = ("serious", "critical")
WIDTHS = {"desktop": {"width": 1280, "height": 900}, "phone": {"width": 390, "height": 844}}
SCHEMES = ("light", "dark")


@dataclass(frozen=True)
class Objects:
    """What the page paths are built from: one of each thing the site shows."""

    api: ApiObjects
    second_evidence_id: int
    upload_id: int
    export_id: int

    @property
    def recipe(self) -> Recipe:
        return self.api.recipe


Path_ = Callable[[Objects], str]


#: Route name → its page's path, built from the fixture objects.
PAGES: dict[str, Path_] = {
    "home": lambda o: "/",
    "recipes:list": lambda o: "/recipes/",
    "recipes:detail": lambda o: f"/recipes/{o.recipe.name}/",
    "recipes:history": lambda o: f"/recipes/{o.recipe.name}/history/",
    "evidence:list": lambda o: "/evidence/",
    "evidence:new": lambda o: "/evidence/new/",
    "evidence:compare": lambda o: (
        f"/evidence/compare/?a={o.api.evidence.pk}&b={o.second_evidence_id}"
    ),
    "evidence:pointers": lambda o: "/evidence/pointers/",
    "evidence:upload": lambda o: f"/evidence/uploads/{o.upload_id}/",
    "evidence:detail": lambda o: f"/evidence/{o.api.evidence.pk}/",
    "evidence:withdraw": lambda o: f"/evidence/{o.api.evidence.pk}/withdraw/",
    "evidence:exports": lambda o: "/exports/",
    "evidence:export": lambda o: f"/exports/{o.export_id}/",
    "evidence:signers": lambda o: "/signers/",
    "evidence:signer": lambda o: f"/signers/{o.api.evidence.signer.slug}/",
    "check": lambda o: "/check/",
    "login": lambda o: "/accounts/login/",
    "clusters:list": lambda o: "/clusters/",
    "clusters:new": lambda o: "/clusters/new/",
    "clusters:detail": lambda o: f"/clusters/{o.api.cluster.pk}/",
    "clusters:settings": lambda o: f"/clusters/{o.api.cluster.pk}/settings/",
    "qualifications": lambda o: "/qualifications/",
    "releases:list": lambda o: "/releases/",
    "releases:detail": lambda o: f"/releases/{o.api.release.pk}/",
    "runs:list": lambda o: "/runs/",
    "runs:detail": lambda o: f"/runs/{o.api.run.pk}/",
    "api-docs": lambda o: "/api/docs/",
}
#: Pages no route name reaches: Django's error handler and the admin's own sign-in.
EXTRA_PAGES: dict[str, Path_] = {
    "404": lambda o: "/no-such-page/",
    "admin:login": lambda o: "/admin/login/",
}

_JSON = "JSON (the API)"
#: Route name → why it answers no HTML page of its own.
NOT_PAGES: dict[str, str] = {
    "badge": "an SVG badge (its text colours are the badge's own, on its own fill)",
    "evidence-feed": "an Atom feed",
    "releases:feed": "an Atom feed",
    "release-badge": "an SVG badge (the recipe badge's template)",
    "recipes:yaml": "YAML text",
    "evidence:pointer-yaml": "YAML text",
    "evidence:signer-key": "a PEM key as text",
    "evidence:export-file": "the export's file (a download)",
    "logout": "POST only: redirects home",
    "clusters:test": "POST only: redirects to the cluster page",
    "runs:start": "POST only: redirects to the run page",
    "runs:cancel": "POST only: redirects to the run page",
    "aicrd:recipe": _JSON,
    "aicrd:query": _JSON,
    "aicr-dashboard:index": _JSON,
    "aicr-dashboard:series": _JSON,
    "aicr-dashboard:listing": _JSON,
    "aicr-dashboard:labels": _JSON,
    "api-schema": "the OpenAPI document (YAML)",
    "health": "plain text for probes",
    "ready": "plain text for probes",
    "metrics": "Prometheus text",
}


def _is_api(name: str) -> bool:
    return name.startswith("api:")


def test_every_route_is_a_page_or_says_why_not() -> None:
    routes = {name for name in _route_names(get_resolver().url_patterns) if not _is_api(name)}
    unplaced = routes - PAGES.keys() - NOT_PAGES.keys()
    assert unplaced == set(), f"add these routes to PAGES (axe-checked) or NOT_PAGES: {unplaced}"
    assert PAGES.keys() & NOT_PAGES.keys() == set()


@pytest.fixture(autouse=True)
def cluster_keys(settings: Any) -> None:
    settings.CLUSTER_KUBECONFIG_KEYS = [Fernet.generate_key().decode()]
    settings.CLUSTER_KUBECONFIG_LOCAL_KEY_FILE = None


@pytest.fixture
def objects(catalog: Catalog, django_user_model: Any) -> Objects:
    trust_roots.production_root_ensure()
    signers.seeded_allowlist_ensure()
    publish(Recipe.objects.get(catalog=catalog, name=EXAMPLE_RECIPE), full_snapshot())
    api = api_objects_make(catalog)
    second = EvidenceFactory(recipe=api.recipe, aicr_version="0.9.0")
    maintainer = django_user_model.objects.create_user(username="rita", password=PASSWORD)
    maintainer.groups.add(Group.objects.get_or_create(name=Role.MAINTAINER)[0])
    upload = UploadLog.objects.create(
        user=maintainer,
        channel="form",
        filename="evidence.tar.gz",
        outcome=UploadOutcome.REFUSED,
        failed_step="signature",
        reason="the signature does not match the statement",
    )
    export = ExportJob.objects.create(
        format=ExportFormat.CSV,
        filters={"recipe": api.recipe.name},
        site="http://127.0.0.1/",
        requested_by=maintainer,
        state=ExportState.DONE,
        total=2,
        done=2,
        filename="evidence-20261201T000000Z.csv",
        size=1234,
        sha256="0" * 64,
    )
    return Objects(api=api, second_evidence_id=second.pk, upload_id=upload.pk, export_id=export.pk)


def _sign_in(page: Any) -> None:
    page.goto("/accounts/login/?next=/")
    page.fill("#id_username", "rita")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    expect(page).to_have_url(re.compile(r"/$"))


def _all_pages(objects: Objects) -> dict[str, str]:
    return {name: path(objects) for name, path in (PAGES | EXTRA_PAGES).items()}


_AXE_RUN = """async (blocking) => {
    const result = await axe.run(document, {resultTypes: ["violations"]});
    return result.violations
        .filter(v => blocking.includes(v.impact))
        .map(v => ({
            rule: v.id,
            impact: v.impact,
            count: v.nodes.length,
            targets: v.nodes.slice(0, 4).map(n => n.target.join(" ")),
            summary: v.nodes[0].failureSummary.split("\\n").slice(0, 2).join(" "),
        }));
}"""


def _axe_findings(page: Any) -> list[dict[str, Any]]:
    page.add_script_tag(path=str(AXE))
    findings: list[dict[str, Any]] = page.evaluate(_AXE_RUN, list(BLOCKING))
    return findings


def _check_verdict(page: Any) -> None:
    """The check page as it looks with a verdict shown, not only its empty form."""
    page.fill("#id_snapshot_text", as_yaml(full_snapshot(driver="570.86.15")))
    page.get_by_role("button", name="Check").click()
    expect(page.locator("[data-verdict]")).to_be_visible()


#: Pages whose interesting state needs a step after loading.
AFTER_LOAD: dict[str, Callable[[Any], None]] = {"check": _check_verdict}


def _every_page(open_page, objects: Objects, **options: Any) -> Iterator[tuple[str, str, Any]]:  # type: ignore[no-untyped-def]
    """Each page, loaded (and in the state ``AFTER_LOAD`` puts it), as anonymous and as a
    signed-in maintainer: ``(role, path, page)``."""
    for role in ("anonymous", "maintainer"):
        page = open_page(**options)
        if role == "maintainer":
            _sign_in(page)
        for name, path in _all_pages(objects).items():
            page.goto(path)
            page.wait_for_load_state("load")
            if name in AFTER_LOAD:
                AFTER_LOAD[name](page)
            yield role, path, page


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("scheme", SCHEMES)
def test_every_page_passes_axe(open_page, objects, scheme, width) -> None:  # type: ignore[no-untyped-def]
    failures: list[str] = []
    total = 0
    options = {"viewport": WIDTHS[width], "color_scheme": scheme, "bypass_csp": True}
    for role, path, page in _every_page(open_page, objects, **options):
        for finding in _axe_findings(page):
            total += finding["count"]
            failures.append(
                f"{role} {path} [{finding['impact']}] {finding['rule']} x{finding['count']}: "
                f"{finding['targets']} — {finding['summary']}"
            )
    print(f"axe {scheme} {width}: {total} serious/critical nodes")
    assert failures == [], "\n".join(failures)


_OVERFLOW = """() => {
    const width = document.documentElement.clientWidth;
    // Inside a box that scrolls or clips sideways (a wide table, a log, the phone nav) an
    // element may be wider than the window: that box scrolls, the page does not.
    const clipped = e => {
        for (let p = e.parentElement; p && p !== document.body; p = p.parentElement) {
            if (getComputedStyle(p).overflowX !== "visible") return true;
        }
        return false;
    };
    const wide = [...document.querySelectorAll("body *")]
        .filter(e => e.getBoundingClientRect().right > width + 1 && !clipped(e))
        .slice(0, 6)
        .map(e => `${e.tagName.toLowerCase()}.${e.className} "${e.textContent.slice(0, 40)}"`);
    return [document.documentElement.scrollWidth - width, wide];
}"""


def test_no_page_is_wider_than_a_320px_phone(open_page, objects) -> None:  # type: ignore[no-untyped-def]
    failures: list[str] = []
    for role, path, page in _every_page(open_page, objects, viewport={"width": 320, "height": 640}):
        overflow, sticking_out = page.evaluate(_OVERFLOW)
        if overflow > 0:
            failures.append(f"{role} {path}: {overflow} px wider, {sticking_out}")
    assert failures == [], "\n".join(failures)


#: A recipe name no catalog has, one long word: the not-found page repeats it twice.
LONG_NAME = "no-such-recipe-" + "h100-eks-ubuntu-training-kubeflow-" * 4


def _error_pages() -> dict[str, tuple[int, str]]:
    """Every error page the site answers in HTML, as its real handler or view renders it: the
    site's handlers (``aicr_site.errors``, the standalone ``error.html``) for each status, the
    role refusal (``forbidden.html``) and the recipe not-found page with a long name."""
    from django.contrib.auth.models import AnonymousUser
    from django.core.exceptions import PermissionDenied
    from django.shortcuts import render
    from django.test import RequestFactory

    from aicr_site import errors

    request = RequestFactory().get("/evidence/1/withdraw/")
    request.user = AnonymousUser()
    refusal = "You need the maintainer role to withdraw evidence (signed in as a reader)."
    answers = {
        "400": errors.bad_request(request),
        "403": errors.permission_denied(request, PermissionDenied(refusal)),
        "403 (role)": render(
            request, "evidence_app/forbidden.html", {"message": refusal}, status=403
        ),
        "404": errors.page_not_found(request),
        "500": errors.server_error(request),
    }
    return {name: (r.status_code, r.content.decode()) for name, r in answers.items()}


def _fulfil(status: int, html: str) -> Callable[..., None]:
    def handler(route: Any, request: Any) -> None:
        route.fulfill(status=status, body=html, content_type="text/html; charset=utf-8")

    return handler


def test_no_error_page_is_wider_than_a_320px_phone(open_page, catalog, live_server) -> None:  # type: ignore[no-untyped-def]
    """Each error page at 320 px: the handlers' pages are served at a path of the live server
    (so they load its real style sheets), the real 404s are asked for by URL."""
    page = open_page(viewport={"width": 320, "height": 640})
    paths = {
        "404 (no route)": "/no-such-page/" + "x" * 120,
        "404 (recipe)": f"/recipes/{LONG_NAME}/",
    }
    for name, (status, html) in _error_pages().items():
        path = f"/__error-page__/{name.replace(' ', '-')}/"
        page.route(f"{live_server.url}{path}", _fulfil(status, html))
        paths[name] = path
    failures = []
    for name, path in paths.items():
        response = page.goto(path)
        assert response is not None, (name, path)
        assert response.status >= 400, (name, path, response.status)
        page.wait_for_load_state("load")
        overflow, sticking_out = page.evaluate(_OVERFLOW)
        if overflow > 0:
            failures.append(f"{name} {path}: {overflow} px wider, {sticking_out}")
    assert len(paths) == 7
    assert failures == [], "\n".join(failures)
