"""htmx (52 KB, more than half of a page's byte budget) is loaded by the pages that use it: a
page with an ``hx-`` attribute that left it out would silently lose its in-place updates, and a
page that never has one pays 52 KB for nothing (docs/benchmarks.md, pages)."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from django.test import Client

from evidence_app.services.tokens import user_with_role
from tests.aicr_site.api_objects import ApiObjects

pytestmark = pytest.mark.django_db

HTMX_SCRIPT = "vendor/htmx/htmx.min.js"
# Every page's <body> carries hx-headers (the CSRF token for htmx requests): not a use of htmx.
HX_ATTRIBUTE = re.compile(r"\shx-(?!headers=)[a-z-]+=")

PAGES: dict[str, Callable[[ApiObjects], str]] = {
    "home": lambda o: "/",
    "recipe list": lambda o: "/recipes/",
    "recipe": lambda o: f"/recipes/{o.recipe.name}/",
    "recipe history": lambda o: f"/recipes/{o.recipe.name}/history/",
    "evidence list": lambda o: "/evidence/",
    "evidence": lambda o: f"/evidence/{o.evidence.pk}/",
    "compare picker": lambda o: f"/evidence/compare/?a={o.evidence.pk}",
    "signers": lambda o: "/signers/",
    "signer": lambda o: f"/signers/{o.evidence.signer.slug}/",
    "check": lambda o: "/check/",
    "runs": lambda o: "/runs/",
    "run": lambda o: f"/runs/{o.run.pk}/",
    "clusters": lambda o: "/clusters/",
    "cluster": lambda o: f"/clusters/{o.cluster.pk}/",
}
# Pages with no in-place update in any state. Others load htmx for what some states show (a
# pager past one page, a live run's polling), so they are held only to the first rule.
NEVER_USES_HTMX = {"home", "recipe", "recipe history", "evidence", "compare picker", "signers"}


@pytest.mark.parametrize("who", ["anonymous", "maintainer"])
@pytest.mark.parametrize("page", PAGES)
def test_a_page_that_uses_htmx_loads_it_and_one_that_never_does_does_not(
    api_objects: ApiObjects, page: str, who: str
) -> None:
    client = Client()
    if who == "maintainer":
        client.force_login(user_with_role(username="htmx-maintainer", role="maintainer"))
    response = client.get(PAGES[page](api_objects))
    if response.status_code == 302:  # a maintainer's page, asked anonymously
        assert who == "anonymous"
        return
    assert response.status_code == 200
    html = response.content.decode()

    uses = HX_ATTRIBUTE.findall(html)
    if uses:
        assert HTMX_SCRIPT in html, (page, who, uses[:3])
    if page in NEVER_USES_HTMX:
        assert not uses, (page, who, uses[:3])
        assert HTMX_SCRIPT not in html, (page, who)
