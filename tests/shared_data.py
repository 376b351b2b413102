"""Where the tests find AICR's reference data (never needed by the product at run time).

The data lives in the repository under ``tests/data/`` (sources, commits and licences in
``tests/data/README.md``), so a bare clone runs the whole suite. Only ``make snapshot`` reads
the team's reference tree beside the repository.
"""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED = REPO_ROOT / "tests" / "data"
AICR = SHARED / "aicr"
RECIPES_TREE = AICR / "recipes"
GOLDEN = AICR / "golden"
SIGSTORE_FIXTURES = SHARED / "fixtures" / "sigstore"
