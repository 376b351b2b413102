"""The catalog importer: idempotence, versioning, change marking, and refusing broken trees."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from recipes_app import resolver
from recipes_app.models import Catalog, Recipe, RecipeChange
from recipes_app.services import catalog_import, content_digest
from recipes_app.snapshot import BUNDLED_SNAPSHOT, Snapshot, read_snapshot, write_snapshot
from tests.shared_data import GOLDEN

pytestmark = pytest.mark.django_db

NCCL_THRESHOLD = '          value: ">= 300"\n'


def _with_lower_nccl_threshold(files: dict[str, str]) -> dict[str, str]:
    """The real tree with the H100 EKS NCCL threshold lowered: a realistic catalog change."""
    path = "overlays/h100-eks-training.yaml"
    assert files[path].count(NCCL_THRESHOLD) == 1
    return {**files, path: files[path].replace(NCCL_THRESHOLD, '          value: ">= 250"\n')}


def test_it_imports_every_leaf_and_profile_variant(real_catalog: Catalog) -> None:
    names = set(real_catalog.recipes.values_list("name", flat=True))
    leaves = set(resolver.resolve_leaves(resolver.load_catalog(real_catalog.files), version="dev"))
    assert len(leaves) == 45
    assert leaves <= names
    variants = names - leaves
    assert variants, "the AKS and GKE-COS profiled leaves have gpuStack variants"
    assert all("-gpustack-" in name for name in variants)


def test_it_stores_the_digest_aicr_computes_for_the_same_recipe(real_catalog: Catalog) -> None:
    """aicr (version "dev") emitted this bundle for the same recipe; its subject digest must
    equal our digest, and the bundled recipe.yaml must equal our canonical bytes."""
    bundle = GOLDEN / "generated/evidence-example-full/summary-bundle"
    recipe = real_catalog.recipes.get(name="h100-eks-ubuntu-training-kubeflow")
    expected = (bundle / "recipe.yaml").read_text()
    assert recipe.canonical_yaml == expected
    assert recipe.digest == hashlib.sha256(expected.encode()).hexdigest()
    assert recipe.digest in (bundle / "statement.intoto.json").read_text()


def test_it_is_a_no_op_for_the_same_tree(
    real_catalog: Catalog, real_tree_files: dict[str, str]
) -> None:
    before = (Catalog.objects.count(), Recipe.objects.count())
    result = catalog_import(files=real_tree_files, source="again", aicr_version="dev")
    assert result.created is False
    assert result.catalog == real_catalog
    assert (Catalog.objects.count(), Recipe.objects.count()) == before


def test_it_makes_a_new_version_and_marks_changed_digests(
    real_catalog: Catalog, real_tree_files: dict[str, str]
) -> None:
    result = catalog_import(
        files=_with_lower_nccl_threshold(real_tree_files), source="edited", aicr_version="dev"
    )
    assert result.created
    assert Catalog.objects.current() == result.catalog
    # Only recipes whose chain includes h100-eks-training can change; the Slurm leaf clears
    # its performance phase (`checks: []`), so the threshold never reaches it.
    in_chain = {
        r.name for r in real_catalog.recipes.all() if "h100-eks-training" in r.applied_overlays
    }
    assert set(result.changed) <= in_chain
    assert "h100-eks-ubuntu-training-kubeflow" in result.changed
    assert "h100-eks-ubuntu-training-slurm" in in_chain
    assert "h100-eks-ubuntu-training-slurm" not in result.changed
    expected = set(result.changed)
    changed_rows = result.catalog.recipes.filter(change=RecipeChange.CHANGED)
    assert set(changed_rows.values_list("name", flat=True)) == expected
    assert not result.new
    assert not result.removed
    new_recipe = result.catalog.recipes.get(name="h100-eks-ubuntu-training-kubeflow")
    old_recipe = real_catalog.recipes.get(name="h100-eks-ubuntu-training-kubeflow")
    assert new_recipe.digest != old_recipe.digest
    assert "'>= 250'" in new_recipe.deterministic_yaml


def test_it_treats_another_aicr_version_as_a_new_version(
    real_catalog: Catalog, real_tree_files: dict[str, str]
) -> None:
    result = catalog_import(files=real_tree_files, source="release", aicr_version="v0.19.0")
    assert result.created
    assert len(result.changed) == real_catalog.recipes.count()


@pytest.mark.parametrize(
    ("damage", "named"),
    [
        (lambda f: {**f, "overlays/eks.yaml": "spec: [unclosed\n"}, "overlays/eks.yaml"),
        (
            lambda f: {k: v for k, v in f.items() if k != "components/gpu-operator/values.yaml"},
            "components/gpu-operator/values.yaml",
        ),
    ],
    ids=["malformed-yaml", "missing-values-file"],
)
def test_it_imports_nothing_from_a_broken_tree(
    real_tree_files: dict[str, str], damage: Callable[[dict[str, str]], dict[str, str]], named: str
) -> None:
    before = (Catalog.objects.count(), Recipe.objects.count())
    with pytest.raises(resolver.CatalogError) as excinfo:
        catalog_import(files=damage(real_tree_files), source="broken", aicr_version="dev")
    assert named in str(excinfo.value)
    assert (Catalog.objects.count(), Recipe.objects.count()) == before


def test_it_reports_a_broken_tree_by_file(tmp_path: Path, real_tree_files: dict[str, str]) -> None:
    for rel, text in real_tree_files.items():
        target = tmp_path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    (tmp_path / "overlays/h100-any.yaml").write_text("kind: RecipeMetadata\nspec: {base: nope\n")
    before = Catalog.objects.count()
    with pytest.raises(CommandError, match=r"overlays/h100-any\.yaml"):
        call_command("import_catalog", str(tmp_path), stdout=StringIO())
    assert Catalog.objects.count() == before


def test_it_imports_a_tree_then_says_unchanged(
    tmp_path: Path, real_tree_files: dict[str, str]
) -> None:
    edited = _with_lower_nccl_threshold(real_tree_files)
    for rel, text in edited.items():
        target = tmp_path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    out = StringIO()
    call_command("import_catalog", str(tmp_path), stdout=out)
    assert "digest changed: h100-eks-ubuntu-training-kubeflow" in out.getvalue()
    out = StringIO()
    call_command("import_catalog", str(tmp_path), stdout=out)
    assert "Unchanged" in out.getvalue()


def test_it_bundles_a_snapshot_of_the_real_tree(real_tree_files: dict[str, str]) -> None:
    """The site ships a snapshot so `make run` needs nothing outside the repo; it must be
    exactly the reference tree (regenerate with `make snapshot`)."""
    snapshot = read_snapshot(BUNDLED_SNAPSHOT)
    assert content_digest(snapshot.files) == content_digest(real_tree_files)
    assert snapshot.aicr_version == "dev"
    assert "8703d8cf" in snapshot.source


def test_it_round_trips_a_snapshot(tmp_path: Path, real_tree_files: dict[str, str]) -> None:
    path = tmp_path / "snap.json.gz"
    write_snapshot(path, Snapshot(source="x@1", aicr_version="dev", files=real_tree_files))
    first = path.read_bytes()
    write_snapshot(path, Snapshot(source="x@1", aicr_version="dev", files=real_tree_files))
    assert path.read_bytes() == first, "snapshots are byte-deterministic"
    out = StringIO()
    call_command("import_catalog", str(path), stdout=out)
    assert "Unchanged" in out.getvalue()  # same files and version as the session catalog


def test_it_refuses_a_corrupt_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "bad.json.gz"
    path.write_bytes(b"not gzip")
    with pytest.raises(CommandError, match="not a readable gzip snapshot"):
        call_command("import_catalog", str(path), stdout=StringIO())
