from __future__ import annotations

import functools
import os
from collections.abc import Iterator

import pytest
from pytest_django.plugin import blocking_manager_key

from evidence_app.services import signers, trust_roots
from recipes_app import resolver
from recipes_app.models import Catalog
from recipes_app.services import catalog_import
from tests.oci_registry import running_registry
from tests.shared_data import RECIPES_TREE

REAL_CATALOG_SOURCE = "aicr main-08 (tests)"


@functools.cache
def _tree_files() -> dict[str, str]:
    return resolver.read_tree(RECIPES_TREE)


@pytest.fixture(scope="session")
def real_tree_files() -> dict[str, str]:
    """The files of the real AICR recipe tree in tests/data (read once per session)."""
    return _tree_files()


def _base_rows_ensure(tree_files: dict[str, str]) -> None:
    """The rows every database test may assume: the real catalog, imported through the product's
    own importer, and what migration 0002 seeds (the production trust root and allowlist)."""
    catalog_import(files=tree_files, source=REAL_CATALOG_SOURCE, aicr_version="dev")
    trust_roots.production_root_ensure()
    signers.seeded_allowlist_ensure()


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker, real_tree_files):  # type: ignore[no-untyped-def]
    """Import the real catalog once per test database.

    Tests run inside transactions on top of it; transactional tests that flush the database
    must re-import it with the ``real_catalog`` fixture.
    """
    with django_db_blocker.unblock():
        _base_rows_ensure(real_tree_files)


def _database_use(item: pytest.Item) -> str:
    """``"transactional"``, ``"transaction"`` or ``"none"``, as pytest-django decides it."""
    fixtures = getattr(item, "fixturenames", ())
    marker = item.get_closest_marker("django_db")
    if (
        "transactional_db" in fixtures
        or "live_server" in fixtures
        or (marker is not None and (marker.kwargs.get("transaction") or marker.args[:1] == (True,)))
    ):
        return "transactional"
    return "transaction" if marker is not None or "db" in fixtures else "none"


class _Flushed:
    """Whether a transactional test has flushed this worker's database since the base rows were
    last put back."""

    since_base = False


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Put the base rows back before the first transaction-wrapped test after a flush.

    In one process pytest-django runs every transactional test last, so nothing after a flush
    needs the base rows; under pytest-xdist a worker runs whichever tests it is sent next, and
    a flushed database would fail tests that rely on the catalog. This runs
    before the test's fixtures (so outside its transaction), once per flush, not once per test.
    """
    if _Flushed.since_base and _database_use(item) == "transaction":
        with item.config.stash[blocking_manager_key].unblock():
            _base_rows_ensure(_tree_files())
        _Flushed.since_base = False


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):  # type: ignore[no-untyped-def]
    yield
    if _database_use(item) == "transactional":
        _Flushed.since_base = True


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
