"""Playwright (sync API) driving Debian's Chromium against pytest-django's live server.

Never downloads Playwright's own browsers: the tests skip when ``/usr/bin/chromium`` is
missing (``apt-get install -y chromium``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from recipes_app.models import Catalog
from recipes_app.services import catalog_import
from tests.conftest import REAL_CATALOG_SOURCE

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed: apt-get install -y chromium")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop running in this thread; Django's ORM (used
    # by the fixtures, never concurrently with the browser) refuses to run there otherwise.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
            )
            yield browser
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def catalog(transactional_db: None, real_tree_files: dict[str, str]) -> Catalog:
    """The real catalog, imported again: live-server tests flush the database after each test."""
    return catalog_import(
        files=real_tree_files, source=REAL_CATALOG_SOURCE, aicr_version="dev"
    ).catalog


@dataclass
class ConsoleLog:
    """Console messages and uncaught errors of one page, to fail on CSP violations."""

    messages: list[str] = field(default_factory=list)

    def csp_violations(self) -> list[str]:
        return [m for m in self.messages if "Content Security Policy" in m]


@pytest.fixture
def console() -> ConsoleLog:
    return ConsoleLog()


def _open_page(browser, console: ConsoleLog, **context_options):  # type: ignore[no-untyped-def]
    context = browser.new_context(**context_options)
    page = context.new_page()
    page.on("console", lambda message: console.messages.append(f"{message.type}: {message.text}"))
    page.on("pageerror", lambda error: console.messages.append(f"pageerror: {error}"))
    page.set_default_timeout(10_000)
    return context, page


@pytest.fixture
def page(browser, live_server, catalog, console):  # type: ignore[no-untyped-def]
    """A desktop-sized page; fails the test on any CSP violation reported in its console."""
    context, page = _open_page(
        browser,
        console,
        base_url=live_server.url,
        viewport={"width": 1280, "height": 900},
        permissions=["clipboard-read", "clipboard-write"],
    )
    yield page
    context.close()
    assert console.csp_violations() == []


@pytest.fixture
def open_page(browser, live_server, catalog, console):  # type: ignore[no-untyped-def]
    """Open more pages with other options (a phone viewport, JavaScript off)."""
    contexts = []

    def opener(**options):  # type: ignore[no-untyped-def]
        context, page = _open_page(browser, console, base_url=live_server.url, **options)
        contexts.append(context)
        return page

    yield opener
    for context in contexts:
        context.close()
    assert console.csp_violations() == []
