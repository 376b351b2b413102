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
# AICR's complete example bundle (pkg/evidence/attestation.Emit, unsigned) and the snapshot it
# was emitted from (the mock snapshot with a Snapshot header).
EVIDENCE_EXAMPLE_BUNDLE = GOLDEN / "generated" / "evidence-example-full" / "summary-bundle"
SNAPSHOT_EXAMPLE = AICR / "_generated" / "snapshot-example.yaml"
# A real `aicr validate --no-cluster` CTRF (byte-parity reference for the orchestrator's writer)
# and the validator catalog the orchestrator plans Jobs from.
CTRF_NO_CLUSTER = AICR / "_generated" / "validate-no-cluster.ctrf.json"
VALIDATOR_CATALOG = RECIPES_TREE / "validators" / "catalog.yaml"
# The measurements-only snapshot AICR's CUJ1 chainsaw test validates against (no header).
MOCK_SNAPSHOT = AICR / "tests" / "chainsaw" / "cli" / "cuj1-training" / "mock-snapshot.yaml"
# One of AICR's generic NCCL benchmark TrainingRuntimes (validators/performance/testdata), as a
# recipe would ship it in its data tree for nccl-benchmark-runtime-ref.
BENCHMARK_RUNTIME_B200_ANY = AICR / "validators/performance/testdata/b200/any/runtime.yaml"
