"""Broken and hostile recipe trees: every one must fail with a ``CatalogError`` that names the
file and the field, never with a crash, a hang or a silently wrong catalog."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from recipes_app.resolver import CatalogError, load_catalog, read_tree, resolve
from recipes_app.resolver.yamlload import MAX_FILE_BYTES

from .conftest import copy_tree


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return copy_tree(tmp_path / "recipes")


def damage(tree: Path, rel: str, old: str, new: str) -> None:
    path = tree / rel
    text = path.read_text()
    assert old in text, f"{old!r} not in {rel}"
    path.write_text(text.replace(old, new, 1))


def load_error(tree: Path) -> CatalogError:
    with pytest.raises(CatalogError) as info:
        load_catalog(read_tree(tree))
    return info.value


def assert_names(err: CatalogError, path: str, field: str) -> None:
    assert err.path == path
    assert err.field == field
    assert str(err).startswith(f"{path}: {field}: ")


def test_it_loads_an_undamaged_copy(tree: Path) -> None:
    catalog = load_catalog(read_tree(tree))
    assert len(catalog.leaves) == 45


def test_it_reports_malformed_yaml_with_its_location(tree: Path) -> None:
    damage(tree, "overlays/eks.yaml", "  criteria:\n", "  criteria: [unclosed\n")
    err = load_error(tree)
    assert err.path == "overlays/eks.yaml"
    assert err.field.startswith("line ")
    assert "malformed YAML" in err.message


def test_it_refuses_a_cycle_in_spec_base(tree: Path) -> None:
    damage(tree, "overlays/eks.yaml", "  criteria:\n", "  base: h100-eks-training\n  criteria:\n")
    err = load_error(tree)
    assert err.field == "spec.base"
    assert err.path in {
        "overlays/eks.yaml",
        "overlays/eks-training.yaml",
        "overlays/h100-eks-training.yaml",
    }
    assert "circular inheritance: eks-training -> eks -> h100-eks-training -> eks-training" in (
        err.message
    )


def test_it_refuses_an_unknown_base(tree: Path) -> None:
    damage(tree, "overlays/eks-training.yaml", "  base: eks\n", "  base: eks-nope\n")
    err = load_error(tree)
    assert_names(err, "overlays/eks-training.yaml", "spec.base")
    assert "'eks-nope'" in err.message


def test_it_refuses_a_dependency_cycle_in_base(tree: Path) -> None:
    damage(
        tree,
        "overlays/base.yaml",
        "      valuesFile: components/nfd/values.yaml\n",
        "      valuesFile: components/nfd/values.yaml\n      dependencyRefs: [gpu-operator]\n",
    )
    err = load_error(tree)
    assert_names(err, "overlays/base.yaml", "spec.componentRefs")
    assert "circular dependency" in err.message


def test_it_refuses_a_dependency_cycle_across_a_chain(tree: Path) -> None:
    damage(
        tree,
        "overlays/eks-training.yaml",
        "      valuesFile: components/gpu-operator/values-eks-training.yaml\n",
        "      valuesFile: components/gpu-operator/values-eks-training.yaml\n"
        "      dependencyRefs: [aws-efa]\n",
    )
    damage(
        tree,
        "overlays/eks.yaml",
        "      valuesFile: components/aws-efa/values.yaml\n",
        "      valuesFile: components/aws-efa/values.yaml\n      dependencyRefs: [gpu-operator]\n",
    )
    err = load_error(tree)
    assert err.path in ("overlays/eks.yaml", "overlays/eks-training.yaml")
    assert err.field == "spec.componentRefs.dependencyRefs"
    assert "circular dependency" in err.message
    assert "aws-efa" in err.message
    assert "gpu-operator" in err.message


def test_it_refuses_a_yaml_bomb_of_nested_aliases(tree: Path) -> None:
    bomb = ["    bomb:", "      l0: &l0 [" + ", ".join(["lol"] * 100) + "]"]
    bomb += [f"      l{i}: &l{i} [*l{i - 1}, *l{i - 1}]" for i in range(1, 16)]
    damage(tree, "overlays/eks.yaml", "  criteria:\n", "  criteria:\n" + "\n".join(bomb) + "\n")
    err = load_error(tree)
    assert err.path == "overlays/eks.yaml"
    assert err.field.startswith("line ")
    assert "YAML bomb" in err.message


def test_it_refuses_too_many_aliases(tree: Path) -> None:
    lines = ["    x: &x 1"] + [f"    a{i}: *x" for i in range(40)]
    damage(tree, "overlays/eks.yaml", "  criteria:\n", "  criteria:\n" + "\n".join(lines) + "\n")
    err = load_error(tree)
    assert err.path == "overlays/eks.yaml"
    assert "aliases" in err.message


def test_it_refuses_a_recursive_alias(tree: Path) -> None:
    damage(tree, "overlays/eks.yaml", "  criteria:\n", "  loop: &loop [*loop]\n  criteria:\n")
    err = load_error(tree)
    assert err.path == "overlays/eks.yaml"
    assert err.field.startswith("line ")


@pytest.mark.parametrize("depth", [100, 5000])
def test_it_refuses_a_deeply_nested_document(tree: Path, depth: int) -> None:
    deep = "[" * depth + "]" * depth
    damage(tree, "overlays/eks.yaml", "  criteria:\n", f"  deep: {deep}\n  criteria:\n")
    err = load_error(tree)
    assert err.path == "overlays/eks.yaml"
    assert err.field.startswith("line ")
    assert "nesting" in err.message


def test_it_refuses_a_deeply_nested_block_document(tree: Path) -> None:
    deep = "".join(f"\n{'  ' * (i + 2)}k{i}:" for i in range(200)) + " x"
    damage(tree, "overlays/eks.yaml", "  criteria:\n", f"  deep:{deep}\n  criteria:\n")
    err = load_error(tree)
    assert "nesting deeper than" in err.message


def test_it_refuses_a_missing_values_file(tree: Path) -> None:
    (tree / "components/aws-efa/values.yaml").unlink()
    err = load_error(tree)
    assert_names(err, "overlays/eks.yaml", "spec.componentRefs[3].valuesFile")
    assert "components/aws-efa/values.yaml" in err.message


def test_it_refuses_a_values_file_outside_the_tree(tree: Path) -> None:
    damage(
        tree,
        "overlays/eks.yaml",
        "components/aws-efa/values.yaml",
        "../../../etc/passwd",
    )
    err = load_error(tree)
    assert_names(err, "overlays/eks.yaml", "spec.componentRefs[3].valuesFile")


def test_it_refuses_a_missing_health_check_assert_file(tree: Path) -> None:
    (tree / "checks/nfd/health-check.yaml").unlink()
    err = load_error(tree)
    assert_names(err, "registry.yaml", "components[0].healthCheck.assertFile")


def test_it_refuses_a_wrong_kind(tree: Path) -> None:
    damage(tree, "overlays/eks.yaml", "kind: RecipeMetadata", "kind: RecipeMixin")
    err = load_error(tree)
    assert_names(err, "overlays/eks.yaml", "kind")


def test_it_refuses_a_wrong_mixin_kind(tree: Path) -> None:
    damage(tree, "mixins/os-ubuntu.yaml", "kind: RecipeMixin", "kind: RecipeMetadata")
    err = load_error(tree)
    assert_names(err, "mixins/os-ubuntu.yaml", "kind")


def test_it_refuses_a_wrong_api_version(tree: Path) -> None:
    damage(tree, "overlays/eks.yaml", "apiVersion: aicr.run/v1alpha2", "apiVersion: aicr.run/v9")
    err = load_error(tree)
    assert_names(err, "overlays/eks.yaml", "apiVersion")


def test_it_refuses_an_unknown_mixin(tree: Path) -> None:
    damage(tree, "mixins/os-ubuntu.yaml", "name: os-ubuntu", "name: os-ubuntu-renamed")
    err = load_error(tree)
    assert err.field.startswith("spec.mixins[")
    assert "'os-ubuntu'" in err.message


def test_it_refuses_an_unknown_component(tree: Path) -> None:
    damage(tree, "overlays/eks.yaml", "    - name: aws-efa\n", "    - name: aws-efa-typo\n")
    err = load_error(tree)
    assert_names(err, "overlays/eks.yaml", "spec.componentRefs[3].name")
    assert "unknown component 'aws-efa-typo'" in err.message


def test_it_refuses_an_unknown_dependency(tree: Path) -> None:
    damage(
        tree,
        "overlays/eks.yaml",
        "      valuesFile: components/aws-efa/values.yaml\n",
        "      valuesFile: components/aws-efa/values.yaml\n      dependencyRefs: [ghost]\n",
    )
    err = load_error(tree)
    assert_names(err, "overlays/eks.yaml", "spec.componentRefs[3].dependencyRefs[0]")


def test_it_refuses_an_unknown_validator_check(tree: Path) -> None:
    damage(tree, "overlays/eks.yaml", "        - platform-health\n", "        - platform-wealth\n")
    err = load_error(tree)
    assert_names(err, "overlays/eks.yaml", "spec.validation.conformance.checks[0]")


def test_it_refuses_a_bad_constraint_measurement_path(tree: Path) -> None:
    damage(tree, "overlays/eks.yaml", "K8s.server.version", "K8s.servr.version")
    err = load_error(tree)
    assert_names(err, "overlays/eks.yaml", "spec.constraints[0].name")


def test_it_refuses_unknown_fields_in_strict_documents(tree: Path) -> None:
    damage(tree, "overlays/aks.yaml", "  criteria:\n", "  criterion: {}\n  criteria:\n")
    err = load_error(tree)
    assert_names(err, "overlays/aks.yaml", "spec.criterion")


def test_it_refuses_duplicate_mapping_keys(tree: Path) -> None:
    damage(tree, "overlays/eks.yaml", "    service: eks\n", "    service: eks\n    service: gke\n")
    err = load_error(tree)
    assert err.path == "overlays/eks.yaml"
    assert "already defined" in err.message


def test_it_refuses_an_invalid_profile_declaration(tree: Path) -> None:
    damage(tree, "overlays/aks.yaml", "    default: azure-managed\n", "    default: nobody\n")
    err = load_error(tree)
    assert_names(err, "overlays/aks.yaml", "spec.profile")
    assert 'default "nobody" is not a declared value' in err.message


def test_it_refuses_a_profile_that_breaks_union_totality(tree: Path) -> None:
    damage(tree, "overlays/aks.yaml", "              toolkit: {enabled: true}\n", "")
    err = load_error(tree)
    assert_names(err, "overlays/aks.yaml", "spec.profile")
    assert "union totality" in err.message


def test_it_refuses_a_symlink_that_escapes_the_tree(tree: Path, tmp_path: Path) -> None:
    outside = tmp_path / "secret.yaml"
    outside.write_text("kind: RecipeMixin\n")
    (tree / "mixins/evil.yaml").symlink_to(outside)
    with pytest.raises(CatalogError) as info:
        read_tree(tree)
    assert_names(info.value, "mixins/evil.yaml", "<file>")
    assert "outside the recipe tree" in info.value.message


def test_it_allows_a_symlink_inside_the_tree(tree: Path) -> None:
    os.symlink("../overlays/eks.yaml", tree / "components/eks-link.yaml")
    files = read_tree(tree)
    assert files["components/eks-link.yaml"] == files["overlays/eks.yaml"]


def test_it_refuses_an_oversized_file(tree: Path) -> None:
    with (tree / "components/nfd/huge.yaml").open("w") as fh:
        fh.truncate(MAX_FILE_BYTES + 1)
    with pytest.raises(CatalogError) as info:
        read_tree(tree)
    assert_names(info.value, "components/nfd/huge.yaml", "<file>")


def test_it_refuses_a_missing_base(tree: Path) -> None:
    (tree / "overlays/base.yaml").unlink()
    err = load_error(tree)
    assert err.path == "overlays/base.yaml"


def test_it_refuses_a_missing_registry(tree: Path) -> None:
    (tree / "registry.yaml").unlink()
    err = load_error(tree)
    assert err.path == "registry.yaml"


def test_it_reports_a_resolve_time_mixin_conflict_as_resolution_error(tree: Path) -> None:
    """Conflicts that only exist after merging are refused when resolving, not loading."""
    from recipes_app.resolver import ResolutionError

    damage(
        tree,
        "overlays/eks-training.yaml",
        "    - name: K8s.server.version\n",
        "    - name: OS.release.ID\n      value: ubuntu\n    - name: K8s.server.version\n",
    )
    catalog = load_catalog(read_tree(tree))
    with pytest.raises(ResolutionError) as info:
        resolve(
            catalog,
            {"service": "eks", "accelerator": "h100", "intent": "training", "os": "ubuntu"},
            version="dev",
        )
    assert info.value.message == (
        'mixin "os-ubuntu" constraint "OS.release.ID" conflicts with inheritance chain or '
        "another mixin"
    )


def test_it_refuses_a_dependency_cycle_that_only_merging_creates(
    tree_files: dict[str, str],
) -> None:
    """Each chain is acyclic on its own; the cycle appears when two leaves are merged."""
    from recipes_app.resolver import ResolutionError

    files = dict(tree_files)
    files["overlays/h100-any.yaml"] = files["overlays/h100-any.yaml"].replace(
        "  validation:\n",
        "  componentRefs:\n    - name: kube-prometheus-stack\n"
        "      dependencyRefs: [prometheus-adapter]\n  validation:\n",
        1,
    )
    catalog = load_catalog(files)
    with pytest.raises(ResolutionError) as info:
        resolve(catalog, {"accelerator": "h100"}, version="dev")
    assert info.value.message == (
        "merged recipe validation failed: [INVALID_REQUEST] dependency validation failed: "
        "[INVALID_REQUEST] circular dependency detected: "
        "[kube-prometheus-stack prometheus-adapter kube-prometheus-stack]"
    )
