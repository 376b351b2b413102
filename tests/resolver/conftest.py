"""Shared fixtures for the resolver tests: the real catalog, loaded once per session."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from recipes_app.resolver import Catalog, load_catalog, read_tree
from tests.shared_data import RECIPES_TREE


@pytest.fixture(scope="session")
def tree_files() -> dict[str, str]:
    return read_tree(RECIPES_TREE)


@pytest.fixture(scope="session")
def catalog(tree_files: dict[str, str]) -> Catalog:
    return load_catalog(tree_files)


def copy_tree(dst: Path) -> Path:
    """A writable copy of the real recipe tree (the shared data is read-only)."""
    for dirpath, _dirnames, filenames in os.walk(RECIPES_TREE):
        rel = Path(dirpath).relative_to(RECIPES_TREE)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for name in filenames:
            target = dst / rel / name
            shutil.copyfile(Path(dirpath) / name, target)
            target.chmod(0o644)
    return dst
