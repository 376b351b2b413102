from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from recipes_app import resolver
from recipes_app.models import Catalog
from recipes_app.services import catalog_import
from tests.oci_registry import running_registry
from tests.shared_data import RECIPES_TREE

REAL_CATALOG_SOURCE = "aicr main-08 (tests)"


@pytest.fixture(scope="session")
def real_tree_files() -> dict[str, str]:
    """The files of the real AICR recipe tree in tests/data (read once per session)."""
    return resolver.read_tree(RECIPES_TREE)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker, real_tree_files):  # type: ignore[no-untyped-def]
    """Import the real catalog once per test database, through the product's own importer.

    Tests run inside transactions on top of it; transactional tests that flush the database
    must re-import it with the ``real_catalog`` fixture.
    """
    with django_db_blocker.unblock():
        catalog_import(files=real_tree_files, source=REAL_CATALOG_SOURCE, aicr_version="dev")


@pytest.fixture
def real_catalog(db: None, real_tree_files: dict[str, str]) -> Catalog:
    """The real AICR catalog (imported once per session; a no-op re-import finds it)."""
    return catalog_import(
        files=real_tree_files, source=REAL_CATALOG_SOURCE, aicr_version="dev"
    ).catalog


# In CI every real part is installed and running, so a skip there means a test silently did
# not run: .ci/run sets AICR_STRICT_SKIPS=1 and any skip becomes a failure naming its reason.
STRICT_SKIPS = os.environ.get("AICR_STRICT_SKIPS") == "1"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if STRICT_SKIPS and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped under AICR_STRICT_SKIPS=1 (CI): {reason}"


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``host:port`` of a throw-away registry (Debian's docker-registry, tests/oci_registry.py)."""
    with running_registry(tmp_path_factory.mktemp("registry")) as running:
        yield running
