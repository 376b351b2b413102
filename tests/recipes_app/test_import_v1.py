"""Importing catalogs of both AICR generations side by side: the v1-format tree that
``manage.py write_v1_tree`` makes from the bundled v0.19 one (no AICR 1.x tree exists offline;
its content is v0.19's), with ``--aicr-version``."""

from __future__ import annotations

import hashlib
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from recipes_app import resolver
from recipes_app.models import Catalog, Recipe
from tests.shared_data import RECIPES_TREE

pytestmark = pytest.mark.django_db


@pytest.fixture
def v1_tree(tmp_path: Path) -> Path:
    out = StringIO()
    call_command("write_v1_tree", str(RECIPES_TREE), str(tmp_path / "v1"), stdout=out)
    assert "not AICR 1.x content" in out.getvalue()
    return tmp_path / "v1"


@pytest.fixture
def v1_catalog(real_catalog: Catalog, v1_tree: Path) -> Catalog:
    call_command(
        "import_catalog",
        str(v1_tree),
        "--aicr-version",
        "v1.0.0",
        "--source",
        "v1-format copy of the v0.19 catalog (tests)",
        stdout=StringIO(),
    )
    current = Catalog.objects.current()
    assert current is not None
    return current


def test_it_imports_a_v1_tree_beside_the_v019_one(
    real_catalog: Catalog, v1_catalog: Catalog
) -> None:
    assert v1_catalog.pk != real_catalog.pk
    assert (real_catalog.api_family, real_catalog.aicr_version) == ("alpha", "dev")
    assert (v1_catalog.api_family, v1_catalog.aicr_version) == ("v1", "v1.0.0")
    assert v1_catalog.source == "v1-format copy of the v0.19 catalog (tests)"
    old = {r.name: r for r in real_catalog.recipes.all()}
    new = {r.name: r for r in v1_catalog.recipes.all()}
    assert set(old) == set(new)
    assert {r.api_version for r in new.values()} == {"aicr.run/v1", "aicr.run/v1beta2"}
    for name, recipe in new.items():
        assert "\nmetadata:\n    appliedOverlays:" in recipe.canonical_yaml
        assert "    version: v1.0.0\n" in recipe.canonical_yaml
        assert recipe.digest == hashlib.sha256(recipe.canonical_yaml.encode()).hexdigest()
        assert recipe.digest != old[name].digest  # apiVersion and metadata.version are hashed
        assert recipe.digest_v3 != old[name].digest_v3  # apiVersion still is
    # Recipes of the old catalog still resolve and read as before (the lens over versions).
    assert Recipe.objects.filter(catalog=real_catalog).count() == len(old)


def test_it_stores_the_catalogs_own_criteria_values_and_check_set(
    real_catalog: Catalog, v1_catalog: Catalog
) -> None:
    assert "rke2" in v1_catalog.criteria_values["service"]
    assert "rke2" not in real_catalog.criteria_values["service"]
    assert "kueue" in v1_catalog.criteria_values["platform"]
    assert v1_catalog.validator_checks == real_catalog.validator_checks
    assert "deployment/operator-health" in v1_catalog.validator_checks
    assert v1_catalog.validator_checks_digest == real_catalog.validator_checks_digest
    assert len(v1_catalog.validator_checks_digest) == 64


def test_it_resolves_queries_with_the_current_catalogs_generation(
    client: Client, v1_catalog: Catalog
) -> None:
    ok = client.get(
        "/api/v1/query/",
        {"service": "eks", "accelerator": "h100", "os": "ubuntu", "intent": "training"},
    )
    assert ok.status_code == 200
    assert ok.json()["apiVersion"] == "aicr.run/v1"
    assert ok.json()["metadata"]["version"] == "v1.0.0"
    guarded = client.get("/api/v1/query/", {"service": "gke", "accelerator": "h100"})
    assert guarded.status_code == 400
    body = guarded.json()
    assert "specify os (valid: cos)" in str(body)
    assert "requiresOS" not in str(body)
    assert "uncovered" in str(body)
    # A value only AICR 1.x knows is a criteria value here, not "invalid service type".
    new_value = client.get("/api/v1/query/", {"service": "k0s", "accelerator": "h200"})
    assert "invalid service type" not in str(new_value.json())


def test_it_refuses_a_version_that_cannot_read_the_tree(
    real_catalog: Catalog, v1_tree: Path
) -> None:
    before = Catalog.objects.count()
    with pytest.raises(CommandError, match=r"reads only aicr\.run/v1alpha2"):
        call_command("import_catalog", str(v1_tree), "--aicr-version", "v0.19.0", stdout=StringIO())
    with pytest.raises(CommandError, match=r"reads only aicr\.run/v1beta1"):
        call_command(
            "import_catalog", str(RECIPES_TREE), "--aicr-version", "v1.0.0", stdout=StringIO()
        )
    assert Catalog.objects.count() == before


def test_it_refuses_a_mixed_tree_naming_the_file(real_catalog: Catalog, v1_tree: Path) -> None:
    mixin = v1_tree / "mixins/os-ubuntu.yaml"
    mixin.write_text(mixin.read_text().replace("aicr.run/v1beta1", "aicr.run/v1alpha2"))
    before = Catalog.objects.count()
    with pytest.raises(CommandError, match=r"mixins/os-ubuntu\.yaml: apiVersion: .*alpha"):
        call_command("import_catalog", str(v1_tree), "--aicr-version", "v1.0.0", stdout=StringIO())
    assert Catalog.objects.count() == before


def test_it_refuses_to_write_over_an_existing_folder(v1_tree: Path) -> None:
    with pytest.raises(CommandError, match="already exists"):
        call_command("write_v1_tree", str(RECIPES_TREE), str(v1_tree), stdout=StringIO())
    assert resolver.load_catalog(resolver.read_tree(v1_tree)).api_family.name == "v1"
