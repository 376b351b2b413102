"""Where the tests find the shared reference data (never needed by the product at run time)."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED = REPO_ROOT.parent / "shared"
AICR = SHARED / "aicr"
RECIPES_TREE = AICR / "recipes"
GOLDEN = AICR / "golden"
