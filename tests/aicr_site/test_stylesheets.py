"""Every page loads the stylesheets its markup needs, and no sheet it leaves unused.

The styles are split so that a page pays only for what it shows (the 100 KB budget of HTML +
CSS + JS, docs/benchmarks.md): ``base.css`` on every page, then at most a sheet or two of the
page's own (``list.css``, ``recipe.css``, ...). A class styled only by a sheet the page leaves
out renders unstyled without any error, so each page, anonymous and signed in as a
maintainer, is held to: every class in its HTML that some sheet styles is styled by a sheet it
loads, and every page sheet it loads styles something on it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

from evidence_app.services.tokens import user_with_role
from tests.aicr_site.api_objects import ApiObjects
from tests.evidence_factories import EvidenceFactory

pytestmark = pytest.mark.django_db

CSS_DIR = Path(settings.BASE_DIR) / "static" / "css"
STYLESHEET = re.compile(r'<link rel="stylesheet" href="/static/css/([\w.-]+\.css)">')
CLASS_ATTRIBUTE = re.compile(r'\sclass="([^"]*)"')
SELECTOR_CLASS = re.compile(r"\.(-?[A-Za-z_][\w-]*)")

PAGES: dict[str, Callable[[ApiObjects], str]] = {
    "home": lambda o: "/",
    "recipe list": lambda o: "/recipes/",
    "recipe": lambda o: f"/recipes/{o.recipe.name}/",
    "recipe, every signer column": lambda o: f"/recipes/{o.recipe.name}/?signers=all",
    "recipe history": lambda o: f"/recipes/{o.recipe.name}/history/",
    "evidence list": lambda o: "/evidence/",
    "qualifications": lambda o: "/qualifications/",
    "releases": lambda o: "/releases/",
    "release": lambda o: f"/releases/{o.release.pk}/",
    "evidence": lambda o: f"/evidence/{o.evidence.pk}/",
    "compare picker": lambda o: f"/evidence/compare/?a={o.evidence.pk}",
    "compare": lambda o: f"/evidence/compare/?a={o.evidence.pk}&b={_second_record(o).pk}",
    "withdraw": lambda o: f"/evidence/{o.evidence.pk}/withdraw/",
    "evidence pointers": lambda o: "/evidence/pointers/",
    "upload": lambda o: "/evidence/new/",
    "signers": lambda o: "/signers/",
    "signer": lambda o: f"/signers/{o.evidence.signer.slug}/",
    "check": lambda o: "/check/",
    "runs": lambda o: "/runs/",
    "run": lambda o: f"/runs/{o.run.pk}/",
    "clusters": lambda o: "/clusters/",
    "cluster": lambda o: f"/clusters/{o.cluster.pk}/",
    "new cluster": lambda o: "/clusters/new/",
    "cluster settings": lambda o: f"/clusters/{o.cluster.pk}/settings/",
    "sign in": lambda o: "/accounts/login/",
    "unknown recipe": lambda o: "/recipes/no-such-recipe/",
}


def _second_record(objects: ApiObjects):  # type: ignore[no-untyped-def]
    """A second record of the same recipe, by the same signer: something to compare with."""
    return EvidenceFactory(recipe=objects.recipe, signer=objects.evidence.signer)


@cache
def styled_by(sheet: str) -> frozenset[str]:
    """The class names that ``sheet``'s selectors mention."""
    text = re.sub(r"/\*.*?\*/", "", (CSS_DIR / sheet).read_text(), flags=re.S)
    selectors = re.findall(r"([^{}]+)\{", text)
    return frozenset(
        name
        for selector in selectors
        if not selector.lstrip().startswith("@")
        for name in SELECTOR_CLASS.findall(re.sub(r"\[[^\]]*\]", "", selector))
    )


def page_classes(html: str) -> set[str]:
    return {name for value in CLASS_ATTRIBUTE.findall(html) for name in value.split()}


@pytest.mark.parametrize("who", ["anonymous", "maintainer"])
@pytest.mark.parametrize("page", PAGES)
def test_a_page_loads_the_sheets_that_style_its_classes_and_no_other(
    api_objects: ApiObjects, page: str, who: str
) -> None:
    client = Client()
    if who == "maintainer":
        client.force_login(user_with_role(username="css-maintainer", role="maintainer"))
    response = client.get(PAGES[page](api_objects))
    if response.status_code == 302:  # a maintainer's page, asked anonymously
        assert who == "anonymous"
        return
    assert response.status_code in (200, 404), (page, response.status_code)
    html = response.content.decode()

    loaded = STYLESHEET.findall(html)
    assert loaded[0] == "base.css", (page, loaded)
    all_sheets = sorted(p.name for p in CSS_DIR.glob("*.css"))
    classes = page_classes(html)
    missing = {
        name: [sheet for sheet in all_sheets if name in styled_by(sheet)]
        for name in sorted(classes)
        if not any(name in styled_by(sheet) for sheet in loaded)
        and any(name in styled_by(sheet) for sheet in all_sheets)
    }
    assert missing == {}, f"{page} ({who}) loads {loaded}; classes styled elsewhere: {missing}"
    unused = [sheet for sheet in loaded[1:] if not classes & styled_by(sheet)]
    assert unused == [], f"{page} ({who}) loads sheets it never uses: {unused}"


def test_every_sheet_is_loaded_by_some_page() -> None:
    templates = "\n".join(
        path.read_text() for path in (Path(settings.BASE_DIR) / "templates").rglob("*.html")
    )
    loaded = set(re.findall(r"\{% static 'css/([\w.-]+\.css)' %\}", templates))
    assert loaded == {p.name for p in CSS_DIR.glob("*.css")}


TEMPLATES = Path(settings.BASE_DIR) / "templates"
TEMPLATE_TAG = re.compile(r"{[{%].*?[}%]}", re.S)


def test_every_branch_of_a_page_template_is_styled_by_the_sheets_it_loads() -> None:
    """The rendered pages above show only the states their data reaches; this reads each page
    template and the partials it includes, every ``{% if %}`` branch included (demo, withdrawn
    and stale evidence, errors, empty states, an earlier catalog, a run's log)."""
    texts = {str(p.relative_to(TEMPLATES)): p.read_text() for p in TEMPLATES.rglob("*.html")}

    def with_includes(name: str, seen: frozenset[str] = frozenset()) -> str:
        text = texts[name]
        parts = [text]
        for other in re.findall(r'{% include "([^"]+)"', text):
            if other in texts and other not in seen:
                parts.append(with_includes(other, seen | {name}))
        return "\n".join(parts)

    all_sheets = sorted(p.name for p in CSS_DIR.glob("*.css"))
    problems = {}
    for name, text in texts.items():
        if '{% extends "base.html" %}' not in text:
            continue
        source = with_includes(name)
        sheets = ["base.css", *re.findall(r"\{% static 'css/([\w.-]+\.css)' %\}", text)]
        classes = {
            token
            for value in CLASS_ATTRIBUTE.findall(" " + source)
            for token in TEMPLATE_TAG.sub(" ", value).split()
            if re.fullmatch(r"[A-Za-z][\w-]*", token)
        }
        missing = {
            cls: [sheet for sheet in all_sheets if cls in styled_by(sheet)]
            for cls in sorted(classes)
            if not any(cls in styled_by(sheet) for sheet in sheets)
            and any(cls in styled_by(sheet) for sheet in all_sheets)
        }
        if missing:
            problems[name] = missing
    assert problems == {}
