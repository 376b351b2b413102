"""``nccl-benchmark-runtime-ref`` lowered as AICR's ``resolveBenchmarkRuntimeRef`` does, with its
messages, and the catalog importer carrying the runtime files a ref can name."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from recipes_app.resolver import read_tree
from tests.shared_data import BENCHMARK_RUNTIME_B200_ANY, RECIPES_TREE
from validators_app.orchestrator import InvalidRecipeInput
from validators_app.orchestrator.runtime_ref import lower_benchmark_runtime_ref

PATH = "validators/performance/testdata/gb200/mycloud/runtime.yaml"
RUNTIME = BENCHMARK_RUNTIME_B200_ANY.read_text()


def document(*constraints: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "ValidationInput",
        "config": {
            "deployment": {"checks": ["operator-health"]},
            "performance": {"checks": ["nccl-all-reduce-bw"], "constraints": list(constraints)},
        },
    }


THRESHOLD = {"name": "nccl-all-reduce-bw", "value": ">= 720"}


def ref(value: str) -> dict[str, str]:
    return {"name": "nccl-benchmark-runtime-ref", "value": value}


def test_it_replaces_the_ref_with_the_files_content_and_leaves_the_input_alone() -> None:
    doc = document(THRESHOLD, ref(" gb200/mycloud "))
    before = copy.deepcopy(doc)
    lowered = lower_benchmark_runtime_ref(doc, read={PATH: RUNTIME}.get)
    assert lowered["config"]["performance"]["constraints"] == [
        THRESHOLD,
        {"name": "nccl-benchmark-runtime", "value": RUNTIME},
    ]
    assert lowered["config"]["deployment"] == doc["config"]["deployment"]
    assert doc == before  # the recipe's lists are shared with the document: never mutated
    # Idempotent: the ref is gone, so a second pass changes nothing.
    assert lower_benchmark_runtime_ref(lowered, read={}.get) == lowered


def test_without_a_ref_nothing_changes_and_nothing_is_read() -> None:
    def refuse(path: str) -> str | None:
        raise AssertionError(f"read {path}")

    for doc in (document(THRESHOLD), document(THRESHOLD, ref("  ")), {"kind": "ValidationInput"}):
        assert lower_benchmark_runtime_ref(doc, read=refuse) == doc


@pytest.mark.parametrize(
    ("constraints", "files", "message"),
    [
        ([ref("gb200")], {}, 'invalid nccl-benchmark-runtime-ref="gb200": must be '
         '"{accelerator}/{service}" (e.g. "gb200/mycloud")'),
        ([ref("../../etc")], {}, 'invalid nccl-benchmark-runtime-ref="../../etc": must be '
         '"{accelerator}/{service}" (e.g. "gb200/mycloud")'),
        ([ref("gb200/a/b")], {}, 'invalid nccl-benchmark-runtime-ref="gb200/a/b": must be '
         '"{accelerator}/{service}" (e.g. "gb200/mycloud")'),
        ([ref("gb200/my\\cloud")], {}, 'invalid nccl-benchmark-runtime-ref="gb200/my\\\\cloud": '
         'must be "{accelerator}/{service}" (e.g. "gb200/mycloud")'),
        ([ref("gb200/mycloud"), ref("gb200/other")], {},
         "declare at most one nccl-benchmark-runtime-ref constraint (found 2)"),
        ([{"name": "nccl-benchmark-runtime", "value": ""}] * 2, {},
         "declare at most one nccl-benchmark-runtime constraint (found 2)"),
        ([ref("gb200/mycloud"), {"name": "nccl-benchmark-runtime", "value": "kind: X"}], {},
         "nccl-benchmark-runtime-ref and an inline nccl-benchmark-runtime are both set — "
         "supply one"),
        ([ref("gb200/mycloud")], {PATH: " \n\t"},
         'nccl-benchmark-runtime-ref="gb200/mycloud" resolved to an empty file '
         '("validators/performance/testdata/gb200/mycloud/runtime.yaml")'),
        ([ref("gb200/mycloud")], {},
         'failed to resolve nccl-benchmark-runtime-ref="gb200/mycloud": expected '
         '"validators/performance/testdata/gb200/mycloud/runtime.yaml" in the --data tree: file '
         '"validators/performance/testdata/gb200/mycloud/runtime.yaml" not found'),
    ],
)  # fmt: skip
def test_it_fails_closed_with_aicrs_messages(
    constraints: list[dict[str, Any]], files: dict[str, str], message: str
) -> None:
    with pytest.raises(InvalidRecipeInput) as caught:
        lower_benchmark_runtime_ref(document(*constraints), read=files.get)
    assert str(caught.value) == message


def test_a_blank_inline_runtime_next_to_a_ref_is_replaced() -> None:
    doc = document({"name": "nccl-benchmark-runtime", "value": " "}, ref("gb200/mycloud"))
    lowered = lower_benchmark_runtime_ref(doc, read={PATH: RUNTIME}.get)
    assert lowered["config"]["performance"]["constraints"] == [
        {"name": "nccl-benchmark-runtime", "value": RUNTIME}
    ]


def test_without_a_data_tree_a_ref_cannot_resolve() -> None:
    with pytest.raises(InvalidRecipeInput) as caught:
        lower_benchmark_runtime_ref(document(ref("gb200/mycloud")), read=None)
    assert str(caught.value) == (
        'nccl-benchmark-runtime-ref="gb200/mycloud" is set but no --data source is available to '
        "resolve it"
    )


def test_the_catalog_importer_carries_the_runtimes_a_ref_can_name(tmp_path: Path) -> None:
    tree = tmp_path / "recipes"
    tree.mkdir()
    for name in ("registry.yaml",):
        (tree / name).write_text((RECIPES_TREE / name).read_text())
    testdata = tree / "validators" / "performance" / "testdata"
    (testdata / "gb200" / "mycloud").mkdir(parents=True)
    (testdata / "gb200" / "mycloud" / "runtime.yaml").write_text(RUNTIME)
    (testdata / "gb200" / "mycloud" / "runtime-net.yaml").write_text(RUNTIME)  # no ref names it
    (testdata / "inference").mkdir()
    (testdata / "inference" / "queue.yaml").write_text("kind: Queue\n")
    files = read_tree(tree)
    assert files[PATH] == RUNTIME
    assert not [p for p in files if p.startswith("validators/") and p != PATH]
    # The stock tree has none: its catalog digest is unchanged by this.
    assert not [p for p in read_tree(RECIPES_TREE) if p.startswith("validators/performance")]
