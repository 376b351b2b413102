"""The ADR-022 v1 apiVersion family: a v1-format tree (made from the bundled v0.19 one by
``recipes_app.v1_tree``, since no AICR 1.x tree exists offline), AICR's real v1 files, and
what resolutions of each generation emit."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml

from recipes_app.resolver import (
    Catalog,
    CatalogError,
    CriteriaError,
    ResolutionError,
    load_catalog,
    parse_criteria,
    recipe_digest,
    recipe_digest_v3,
    resolve,
    resolve_leaves,
    unreadable_reason,
)
from recipes_app.resolver.catalog import decode_overlay
from recipes_app.resolver.criteria import DIMENSIONS, STATIC_VALUES, STATIC_VALUES_V1
from recipes_app.resolver.model import ALPHA, V1
from recipes_app.v1_tree import to_v1_tree
from tests.shared_data import AICR, GOLDEN

V1_FILES = AICR / "_index-v1"
COVERAGE = GOLDEN / "upstream/pkg/recipe/testdata/coverage_golden.yaml"
RESULT_MAP = {ALPHA.result: V1.result, ALPHA.result_profiled: V1.result_profiled}


@pytest.fixture(scope="module")
def v1_files(tree_files: dict[str, str]) -> dict[str, str]:
    return to_v1_tree(tree_files)


@pytest.fixture(scope="module")
def v1_catalog(v1_files: dict[str, str]) -> Catalog:
    return load_catalog(v1_files)


def _as_v1_result(doc: dict[str, Any], version: str) -> dict[str, Any]:
    """What hashing apiVersion predicts: the v0.19 result with only its apiVersion mapped and
    its metadata.version restamped."""
    out = dict(doc, apiVersion=RESULT_MAP[doc["apiVersion"]])
    out["metadata"] = dict(doc["metadata"], version=version)
    return out


def test_it_maps_only_the_top_level_apiversion_of_catalog_files(
    tree_files: dict[str, str], v1_files: dict[str, str]
) -> None:
    changed = {p for p in tree_files if tree_files[p] != v1_files[p]}
    assert "registry.yaml" in changed
    assert changed == {
        p for p in tree_files if p == "registry.yaml" or p.startswith(("overlays/", "mixins/"))
    }
    for path in changed:
        before = [line for line in tree_files[path].splitlines() if line.startswith("apiVersion:")]
        after = [line for line in v1_files[path].splitlines() if line.startswith("apiVersion:")]
        assert len(before) == len(after) == 1
        assert after[0] in ("apiVersion: aicr.run/v1beta1", "apiVersion: aicr.run/v1beta2")
        assert tree_files[path].replace(before[0], after[0], 1) == v1_files[path]


def test_it_reproduces_aicrs_real_v1beta1_overlay_byte_for_byte(
    v1_files: dict[str, str],
) -> None:
    real = (V1_FILES / "recipes/overlays/a100-any.yaml").read_text()
    assert v1_files["overlays/a100-any.yaml"] == real
    overlay = decode_overlay("overlays/a100-any.yaml", real)
    assert overlay.api_version == "aicr.run/v1beta1"
    assert overlay.criteria is not None
    assert overlay.criteria.accelerator == "a100"


def test_it_loads_the_v1_tree_as_the_v1_family(v1_catalog: Catalog, catalog: Catalog) -> None:
    assert v1_catalog.api_family is V1
    assert catalog.api_family is ALPHA
    assert v1_catalog.leaves == catalog.leaves
    assert v1_catalog.validator_checks() == catalog.validator_checks()


def test_it_resolves_v1_apiversions_and_the_catalogs_aicr_version(
    v1_catalog: Catalog, catalog: Catalog
) -> None:
    old = resolve_leaves(catalog, version="dev")
    new = resolve_leaves(v1_catalog, version="v1.0.0")
    assert set(old) == set(new)
    assert len(new) == 45
    versions = {doc["apiVersion"] for doc in new.values()}
    assert versions == {"aicr.run/v1", "aicr.run/v1beta2"}  # Slurm-configured ones: v1beta2
    for name, doc in new.items():
        assert doc["metadata"]["version"] == "v1.0.0"
        predicted = _as_v1_result(old[name], "v1.0.0")
        assert doc == predicted, name
        assert recipe_digest(doc) == recipe_digest(predicted)
        assert recipe_digest(doc) != recipe_digest(old[name])
        # The V3 digest drops metadata.version but keeps apiVersion in the hash.
        assert recipe_digest_v3(doc) != recipe_digest_v3(old[name])
        assert recipe_digest_v3(doc) == recipe_digest_v3(
            _as_v1_result(old[name], "dev") | {"metadata": old[name]["metadata"]}
        )


def test_it_emits_what_each_aicr_version_emits(catalog: Catalog, v1_catalog: Catalog) -> None:
    query = {"service": "eks", "accelerator": "h100", "os": "ubuntu", "intent": "training"}
    assert resolve(catalog, query, version="dev")["apiVersion"] == "aicr.run/v1alpha2"
    assert resolve(catalog, query, version="v0.21.3")["apiVersion"] == "aicr.run/v1alpha2"
    assert resolve(v1_catalog, query, version="v0.21.3")["apiVersion"] == "aicr.run/v1alpha2"
    assert resolve(v1_catalog, query, version="v0.22.0")["apiVersion"] == "aicr.run/v1"
    assert resolve(v1_catalog, query, version="dev")["apiVersion"] == "aicr.run/v1"
    slurm = {**query, "platform": "slurm"}
    assert resolve(v1_catalog, slurm, version="v1.2.0")["apiVersion"] == "aicr.run/v1beta2"
    assert resolve(catalog, slurm, version="dev")["apiVersion"] == "aicr.run/v1alpha3"


def test_it_refuses_trees_an_aicr_version_cannot_read(
    catalog: Catalog, v1_catalog: Catalog
) -> None:
    assert unreadable_reason(catalog, "dev") == unreadable_reason(v1_catalog, "dev") == ""
    assert unreadable_reason(catalog, "v0.22.1") == unreadable_reason(v1_catalog, "v0.21.0") == ""
    assert "reads only aicr.run/v1beta1" in unreadable_reason(catalog, "v1.0.0")
    assert "reads only aicr.run/v1alpha2" in unreadable_reason(v1_catalog, "v0.19.0")


def test_it_refuses_a_tree_mixing_families_naming_the_file(v1_files: dict[str, str]) -> None:
    mixed = dict(v1_files)
    mixed["mixins/os-ubuntu.yaml"] = mixed["mixins/os-ubuntu.yaml"].replace(
        "apiVersion: aicr.run/v1beta1", "apiVersion: aicr.run/v1alpha2"
    )
    with pytest.raises(CatalogError) as info:
        load_catalog(mixed)
    assert info.value.path == "mixins/os-ubuntu.yaml"
    assert info.value.field == "apiVersion"
    assert "alpha apiVersion family" in str(info.value)
    assert "registry.yaml" in str(info.value)


@pytest.mark.parametrize(
    "path", ["overlays/a100-any.yaml", "mixins/os-ubuntu.yaml", "registry.yaml"]
)
@pytest.mark.parametrize("value", ["", '""', "aicr.run/v2"])
def test_it_refuses_an_empty_or_unknown_apiversion_naming_the_file(
    v1_files: dict[str, str], path: str, value: str
) -> None:
    broken = dict(v1_files)
    lines = broken[path].splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith("apiVersion:"))
    lines[at] = f"apiVersion: {value}\n"
    broken[path] = "".join(lines)
    with pytest.raises(CatalogError) as info:
        load_catalog(broken)
    assert (info.value.path, info.value.field) == (path, "apiVersion")
    expected = "has no apiVersion" if value in ("", '""') else "unsupported apiVersion"
    assert expected in str(info.value)


def test_it_reads_the_v1_criteria_enums_from_aicrs_schema(v1_catalog: Catalog) -> None:
    schema = json.loads((V1_FILES / "api/aicr/v1/schemas/RecipeCriteria.schema.json").read_text())
    spec = schema["properties"]["spec"]["properties"]
    for dim in DIMENSIONS:
        assert tuple(v for v in spec[dim]["enum"] if v != "any") == STATIC_VALUES_V1[dim], dim
    new = {"service": "k0s", "accelerator": "vr200", "platform": "kueue"}
    for dim, value in new.items():
        assert value not in STATIC_VALUES[dim]
        assert value in v1_catalog.criteria_values()[dim]
        assert parse_criteria({dim: value}, v1_catalog).dim(dim) == value


def test_it_refuses_v1_values_with_a_v019_catalog(catalog: Catalog) -> None:
    with pytest.raises(CriteriaError) as info:
        parse_criteria({"service": "rke2"}, catalog)
    assert "invalid service type: rke2" in str(info.value)
    assert "rke2" not in catalog.criteria_values()["service"]


def test_it_answers_the_os_guard_in_2322s_shape_for_a_v1_catalog(
    catalog: Catalog, v1_catalog: Catalog
) -> None:
    query = {"service": "gke", "accelerator": "h100"}
    with pytest.raises(ResolutionError) as old:
        resolve(catalog, query, version="dev")
    with pytest.raises(ResolutionError) as new:
        resolve(v1_catalog, query, version="v1.0.0")
    assert old.value.requires_os is True
    assert old.value.uncovered == []
    err = new.value
    assert err.requires_os is False
    assert err.uncovered == ["os"]
    assert err.valid_completions == {"os": ["os=cos"]}
    assert err.message.endswith("specify os (valid: cos)")


def test_it_keeps_every_outcome_and_moves_every_requires_os_case_to_uncovered(
    catalog: Catalog, v1_catalog: Catalog
) -> None:
    """PR #2322: the same queries succeed; each requiresOS answer becomes uncovered [os]."""
    golden = yaml.safe_load(COVERAGE.read_text())
    moved = 0
    for key in golden:
        query = {k: v for k, v in re.findall(r"(\w+)=([^,)]*)", key) if v}
        outcomes = []
        for cat, version in ((catalog, "dev"), (v1_catalog, "v1.0.0")):
            try:
                resolve(cat, query, version=version)
                outcomes.append(None)
            except ResolutionError as exc:
                outcomes.append(exc)
        old, new = outcomes
        assert (old is None) == (new is None), key
        if old is not None and new is not None and old.requires_os:
            moved += 1
            assert new.uncovered == ["os"], key
            assert not new.requires_os, key
            assert new.valid_completions["os"], key
    assert moved == 50
