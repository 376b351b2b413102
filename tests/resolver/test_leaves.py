"""All 45 maximal leaves and the 6 profile runs, compared with AICR's own resolver output."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
import yaml

from recipes_app.resolver import (
    Catalog,
    ResolutionError,
    list_catalog,
    load_catalog,
    parse_criteria,
    profile_variants,
    read_tree,
    resolve,
    resolve_leaves,
    yamlv3,
)
from tests.shared_data import AICR, GOLDEN, RECIPES_TREE

GENERATED = GOLDEN / "generated"
PARITY = GOLDEN / "upstream/pkg/recipe/testdata/catalog_parity_golden.yaml"
PARITY_VERSION = "catalog-parity-golden"
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _load_yaml(text: str) -> Any:
    return yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader


@pytest.fixture(scope="module")
def leaves(catalog: Catalog) -> dict[str, dict[str, Any]]:
    return resolve_leaves(catalog, version=PARITY_VERSION)


def _golden_leaf(name: str) -> dict[str, Any]:
    return _load_yaml((GENERATED / "resolved-leaves" / f"{name}.yaml").read_text())


def _first_difference(got: Any, want: Any, path: str = "") -> str | None:
    if type(got) is not type(want):
        return f"{path}: {got!r:.80} != {want!r:.80}"
    if isinstance(got, dict):
        for key in sorted(set(got) | set(want), key=str):
            if key not in got or key not in want:
                return f"{path}.{key}: present on one side only"
            found = _first_difference(got[key], want[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(got, list):
        if len(got) != len(want):
            return f"{path}: {len(got)} items != {len(want)}"
        for i, (a, b) in enumerate(zip(got, want, strict=True)):
            found = _first_difference(a, b, f"{path}[{i}]")
            if found:
                return found
        return None
    return None if got == want else f"{path}: {got!r:.80} != {want!r:.80}"


def test_it_resolves_all_45_leaves_exactly(leaves: dict[str, dict[str, Any]]) -> None:
    golden = _load_yaml(PARITY.read_text())
    assert sorted(leaves) == sorted(golden)
    assert len(leaves) == 45
    mismatches = []
    for name, doc in leaves.items():
        difference = _first_difference(doc, _golden_leaf(name))
        if difference:
            mismatches.append(f"{name}{difference}")
    assert not mismatches, f"{45 - len(mismatches)}/45 match:\n" + "\n".join(mismatches)


def test_it_matches_the_leaf_index(leaves: dict[str, dict[str, Any]]) -> None:
    index = json.loads((GENERATED / "resolved-leaves-index.json").read_text())
    assert sorted(index) == sorted(leaves)
    for name, entry in index.items():
        doc = leaves[name]
        assert doc["metadata"]["appliedOverlays"] == entry["appliedOverlays"], name
        assert doc["deploymentOrder"] == entry["deploymentOrder"], name
        assert doc["criteria"] == entry["criteria"], name


def test_it_orders_leaves_like_resolve_leaves(leaves: dict[str, dict[str, Any]]) -> None:
    """Sorted by ``Criteria.String()`` (unset dimensions print as ``service=``), then name."""
    dims = ("service", "accelerator", "intent", "os", "platform")

    def go_string(criteria: dict[str, str]) -> str:
        parts = [f"{d}={criteria.get(d, '')}" for d in dims if criteria.get(d, "") != "any"]
        return f"criteria({', '.join(parts)})"

    keys = list(leaves)
    assert keys[0] == "a100-any"  # criteria(accelerator=a100, intent=, os=, platform=)
    assert keys == sorted(keys, key=lambda n: (go_string(leaves[n]["criteria"]), n))


def test_it_resolves_the_6_profile_runs() -> None:
    catalog = load_catalog(read_tree(RECIPES_TREE))
    runs = json.loads((GENERATED / "profile-variants.json").read_text())
    assert len(runs) == 6
    for run in runs:
        doc = resolve(catalog, run["query"], version=PARITY_VERSION, profile=run["profile"] or None)
        want = _load_yaml((GENERATED / run["file"]).read_text())
        assert _first_difference(doc, want) is None, run["file"]
        assert doc["apiVersion"] == run["apiVersion"] == "aicr.run/v1alpha3"
        owned = doc["metadata"]["selectedProfile"]["ownedPaths"]
        assert all(paths == sorted(paths) and "enabled" in paths for paths in owned.values())


def test_it_yamlv3_parity_digests_match_catalog_parity_golden(
    catalog: Catalog, leaves: dict[str, dict[str, Any]]
) -> None:
    golden = _load_yaml(PARITY.read_text())
    mismatches = [n for n, doc in leaves.items() if yamlv3.parity_digest(doc) != golden[n]]
    assert not mismatches, f"{45 - len(mismatches)}/45 parity digests match: {mismatches}"
    for run in json.loads((GENERATED / "profile-variants.json").read_text()):
        doc = resolve(catalog, run["query"], version=PARITY_VERSION, profile=run["profile"] or None)
        want = hashlib.sha256((GENERATED / run["file"]).read_bytes()).hexdigest()
        assert yamlv3.parity_digest(doc) == want, run["file"]


def test_it_never_lets_a_resolution_change_the_catalog(catalog: Catalog) -> None:
    first = resolve_leaves(catalog, version=PARITY_VERSION)
    # Vandalise every returned document; nothing may leak back into the catalog.
    for doc in first.values():
        for ref in doc["componentRefs"]:
            overrides = ref.setdefault("overrides", {})
            overrides["vandalised"] = True
            for value in overrides.values():
                if isinstance(value, dict):
                    value["vandalised"] = True
            ref.get("dependencyRefs", []).append("vandal")
        doc["metadata"]["appliedOverlays"].append("vandal")
        doc["deploymentOrder"].clear()
    second = resolve_leaves(catalog, version=PARITY_VERSION)
    for name, doc in second.items():
        assert _first_difference(doc, _golden_leaf(name)) is None, name
    # Profile application must not leak into later unprofiled-value resolutions either.
    query = parse_criteria(
        {
            "service": "aks",
            "accelerator": "h100",
            "os": "ubuntu",
            "intent": "training",
            "platform": "kubeflow",
        }
    )
    a = resolve(catalog, query, version="x", profile="gpuStack=operator-managed")
    b = resolve(catalog, query, version="x")
    c = resolve(catalog, query, version="x", profile="gpuStack=operator-managed")
    assert a == c
    assert a != b
    assert b == resolve(catalog, query, version="x")


def test_it_lists_profile_variants(catalog: Catalog) -> None:
    variants = profile_variants(catalog)
    recipe_list = json.loads((AICR / "_generated/recipe-list.json").read_text())
    profiled = sorted(e["name"] for e in recipe_list if e["is_leaf"] and e.get("profile"))
    assert sorted({v.leaf for v in variants}) == profiled
    assert len(variants) == 2 * len(profiled) == 20
    by_name = {v.name: v for v in variants}
    aks = by_name["h100-aks-ubuntu-training-kubeflow-gpustack-operator-managed"]
    assert aks.leaf == "h100-aks-ubuntu-training-kubeflow"
    assert aks.profile == "gpuStack=operator-managed"
    assert aks.is_default is False
    assert by_name["h100-aks-ubuntu-training-kubeflow-gpustack-azure-managed"].is_default
    assert by_name["h100-gke-cos-inference-dynamo-gpustack-gke-default"].is_default
    assert sum(v.is_default for v in variants) == len(profiled)
    for v in variants:
        doc = resolve(catalog, v.criteria, version="x", profile=v.profile)
        assert doc["metadata"]["selectedProfile"]["value"] == v.profile.split("=")[1]


def test_it_lists_the_catalog_like_aicr_recipe_list(catalog: Catalog) -> None:
    want = json.loads((AICR / "_generated/recipe-list.json").read_text())
    got = list_catalog(catalog)
    assert [e["name"] for e in got] == [e["name"] for e in want]
    for g, w in zip(got, want, strict=True):
        assert g["is_leaf"] == w["is_leaf"], g["name"]
        assert g["source"] == w["source"]
        assert g.get("profile") == w.get("profile"), g["name"]
        crit = {k.lower(): v for k, v in w["criteria"].items()}
        assert g["criteria"].to_dict() == {k: v for k, v in crit.items() if v}


def test_it_layers_the_profile_overlay_fixture() -> None:
    """AICR's ``testdata/profile-overlay`` as a ``--data`` tree over the embedded catalog."""
    external = read_tree(AICR / "pkg/recipe/testdata/profile-overlay")
    catalog = load_catalog(read_tree(RECIPES_TREE), external=external)
    query = {
        "service": "eks",
        "accelerator": "h100",
        "os": "ubuntu",
        "intent": "training",
        "platform": "kubeflow",
    }
    for selection, value, driver, root in (
        (None, "preinstalled", False, "/"),
        ("gpuStack=preinstalled", "preinstalled", False, "/"),
        ("gpuStack=operator-managed", "operator-managed", True, "/run/nvidia/driver"),
    ):
        doc = resolve(catalog, query, version="dev", profile=selection)
        assert doc["apiVersion"] == "aicr.run/v1alpha3"
        assert doc["metadata"]["selectedProfile"] == {
            "name": "gpuStack",
            "value": value,
            "ownedPaths": {
                "gpu-operator": ["driver.enabled", "enabled"],
                "nvidia-dra-driver-gpu": ["enabled", "nvidiaDriverRoot"],
            },
        }
        refs = {r["name"]: r for r in doc["componentRefs"]}
        assert refs["gpu-operator"]["overrides"]["driver"]["enabled"] is driver
        assert refs["nvidia-dra-driver-gpu"]["overrides"]["nvidiaDriverRoot"] == root
    assert catalog.sources["h100-eks-ubuntu-training-kubeflow"] == "external"


@pytest.mark.parametrize(
    ("query", "profile", "message"),
    [
        (
            {"service": "aks", "accelerator": "h100", "intent": "training", "os": "ubuntu"},
            "gpuStack=nope",
            'profile "gpuStack" has no value "nope"; '
            "valid values: [azure-managed operator-managed]",
        ),
        (
            {"service": "aks", "accelerator": "h100", "intent": "training", "os": "ubuntu"},
            "other=azure-managed",
            'resolved composition declares profile "gpuStack", not "other"',
        ),
        (
            {"service": "eks", "accelerator": "h100", "intent": "training"},
            "gpuStack=operator-managed",
            'profile "gpuStack" was selected, but the resolved composition declares no profile',
        ),
        (
            {"service": "eks", "accelerator": "h100", "intent": "training"},
            "gpuStack",
            "profile must use the exact name=value form",
        ),
    ],
)
def test_it_rejects_bad_profile_selections(
    catalog: Catalog, query: dict[str, str], profile: str, message: str
) -> None:
    with pytest.raises(ResolutionError) as info:
        resolve(catalog, query, version="dev", profile=profile)
    assert info.value.message == message


def test_it_configures_slurm_accounting_like_aicr(catalog: Catalog) -> None:
    query = {
        "service": "eks",
        "accelerator": "h100",
        "os": "ubuntu",
        "intent": "training",
        "platform": "slurm",
    }
    doc = resolve(catalog, query, version="dev")
    assert doc["configuration"] == {"slurm": {"accounting": {"mode": "disabled"}}}
    assert doc["apiVersion"] == "aicr.run/v1alpha3"
    refs = {r["name"]: r for r in doc["componentRefs"]}
    assert refs["slinky-slurm"]["overrides"]["accounting"]["enabled"] is False
    assert refs["mariadb-operator"]["overrides"]["install"] is False
    assert "mariadb-operator" not in doc["deploymentOrder"]
    with pytest.raises(ResolutionError, match="only be set when recipe platform is slurm"):
        resolve(
            catalog, {**query, "platform": "kubeflow"}, version="dev", accounting_mode="disabled"
        )
    with pytest.raises(ResolutionError, match="invalid Slurm accounting mode"):
        resolve(catalog, query, version="dev", accounting_mode="bogus")


def test_it_yamlv3_enables_aicr_provided_slurm_accounting(catalog: Catalog) -> None:
    query = {
        "service": "eks",
        "accelerator": "h100",
        "os": "ubuntu",
        "intent": "training",
        "platform": "slurm",
    }
    doc = resolve(catalog, query, version="dev", accounting_mode="aicr-provided")
    refs = {r["name"]: r for r in doc["componentRefs"]}
    assert refs["slinky-slurm"]["overrides"]["accounting"]["enabled"] is True
    assert refs["slurm-accounting-mariadb"]["overrides"]["install"] is True
    assert "mariadb-operator" in doc["deploymentOrder"]
    steps = _load_yaml(refs["slinky-slurm"]["healthCheckAsserts"])["spec"]["steps"]
    assert steps[-1]["name"] == "validate-accounting-ready"
