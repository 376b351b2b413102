"""htmx (52 KB, more than half of a page's byte budget) is loaded by the pages that use it and
by no other: a page opts in with ``{% block htmx %}{% include "htmx.html" %}{% endblock %}``. A
page with an ``hx-`` attribute that left it out would silently lose its in-place updates; a
page that never has one would pay 52 KB for nothing (docs/benchmarks.md, pages)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

from evidence_app.services.tokens import user_with_role
from tests.aicr_site.api_objects import ApiObjects
from tests.aicr_site.test_stylesheets import PAGES

pytestmark = pytest.mark.django_db

HTMX_SCRIPT = "vendor/htmx/htmx.min.js"
# Every page's <body> carries hx-headers (the CSRF token for htmx requests): not a use of htmx.
HX_ATTRIBUTE = re.compile(r"\shx-(?!headers=)[a-z-]+=")
TEMPLATES = Path(settings.BASE_DIR) / "templates"
OPT_IN = '{% block htmx %}{% include "htmx.html" %}{% endblock %}'
# Pages that load htmx for what only some states show (a pager past one page, a live run's
# polling); every other page must leave it out whenever its HTML has no hx- attribute.
SOMETIMES = {"evidence list", "signer", "run", "cluster"}


def test_a_template_loads_htmx_exactly_when_it_or_what_it_includes_has_an_hx_attribute() -> None:
    texts = {
        str(path.relative_to(TEMPLATES)): path.read_text() for path in TEMPLATES.rglob("*.html")
    }

    def uses_htmx(name: str, seen: frozenset[str] = frozenset()) -> bool:
        text = texts[name]
        included = re.findall(r'{% include "([^"]+)"', text)
        return bool(HX_ATTRIBUTE.search(text)) or any(
            uses_htmx(other, seen | {name})
            for other in included
            if other in texts and other not in seen and other != "htmx.html"
        )

    pages = [name for name, text in texts.items() if '{% extends "base.html" %}' in text]
    assert pages
    wrong = {name for name in pages if uses_htmx(name) != (OPT_IN in texts[name])}
    assert wrong == set()


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
    assert response.status_code in (200, 404)
    html = response.content.decode()

    uses = HX_ATTRIBUTE.findall(html)
    if uses:
        assert HTMX_SCRIPT in html, (page, who, uses[:3])
    elif page not in SOMETIMES:
        assert HTMX_SCRIPT not in html, (page, who)
        assert "htmx-config" not in html, (page, who)
