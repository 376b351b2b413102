"""The snapshot check against real, ingested evidence: identities compared one by one, the verdict
in words, and nothing claimed that the evidence does not record."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.core.cache import cache

from evidence_app.coverage import service
from evidence_app.coverage.service import CheckInputError, check_snapshot
from evidence_app.models import Container, Evidence
from recipes_app.models import Recipe
from tests.evidence_app.coverage_data import as_yaml, full_snapshot, publish
from tests.evidence_factories import EvidenceFactory, example_files, tarball
from tests.shared_data import EVIDENCE_EXAMPLE_BUNDLE, MOCK_SNAPSHOT, SNAPSHOT_EXAMPLE

pytestmark = pytest.mark.usefixtures("evidence_db")
STATED = {"intent": "training", "platform": "kubeflow"}
EXAMPLE_CRITERIA = {"service": "eks", "accelerator": "h100", **STATED}


@pytest.fixture(autouse=True)
def _fresh_identity_cache() -> None:
    cache.clear()
    service._LOCAL.clear()


def test_it_says_validated_on_this_exact_tuple_when_counted_evidence_ran_on_it(
    example_recipe: Recipe,
) -> None:
    publish(example_recipe, full_snapshot(), lab="lab-a")
    publish(example_recipe, full_snapshot(), lab="lab-b")
    result = check_snapshot(as_yaml(full_snapshot()), STATED)
    assert result.recipe == example_recipe.name
    # service and accelerator come from the snapshot (provider aws, model H100).
    assert result.criteria_origin == {
        "service": "snapshot",
        "accelerator": "snapshot",
        "os": "snapshot",
        "intent": "stated",
        "platform": "stated",
    }
    assert [c.ok for c in result.constraints] == [True] * len(result.constraints)
    assert len(result.evidence) == 2
    assert all(e.exact for e in result.evidence)
    assert result.verdict == "validated on this exact tuple by 2 signers"
    assert result.covered


def test_it_names_the_identity_that_differs(example_recipe: Recipe) -> None:
    publish(example_recipe, full_snapshot(driver="570.86.15"))
    result = check_snapshot(as_yaml(full_snapshot()), STATED)
    (match,) = result.evidence
    assert match.differs == ["driver"]
    assert match.values["driver"] == {"snapshot": "580.95.05", "evidence": "570.86.15"}
    assert "kernel" in match.matches
    assert result.verdict == "validated on a different tuple (GPU driver differs)"
    assert not result.covered


def test_it_never_lets_one_tuple_cover_another(example_recipe: Recipe) -> None:
    publish(example_recipe, full_snapshot(kernel="6.8.0-1030-aws", gpu_operator="v25.3.0"))
    publish(example_recipe, full_snapshot(), lab="lab-b")
    yours = full_snapshot(kernel="6.8.0-1030-aws")
    result = check_snapshot(as_yaml(yours), STATED)
    assert sorted(e.differs for e in result.evidence) == [["gpu_operator"], ["kernel"]]
    same_kernel = next(e for e in result.evidence if e.differs == ["gpu_operator"])
    assert same_kernel.values == {"gpu_operator": {"snapshot": "v25.10.1", "evidence": "v25.3.0"}}
    assert "kernel" in same_kernel.matches
    assert result.verdict.startswith("validated on a different tuple (")
    assert not result.covered


def test_it_says_redacted_not_differs_for_redacted_evidence_and_covers_as_recorded(
    example_recipe: Recipe,
) -> None:
    # AICR's default redaction keeps no Helm releases, ClusterPolicy or node labels: redacted by
    # the bundle's own redaction block, never a difference and never a match.
    publish(example_recipe, full_snapshot(), redact=True)
    result = check_snapshot(as_yaml(full_snapshot()), STATED)
    (match,) = result.evidence
    assert not match.differs
    assert set(match.redacted) == {"driver", "gpu_operator", "dra_driver", "instance_type"}
    assert match.not_recorded == []
    assert "kernel" in match.matches  # K8s.node kernel-version is on the allowlist
    assert not match.exact
    assert match.matches_as_recorded
    assert result.verdict == (
        "validated by 1 signer on a tuple whose every recorded identity matches; 4 redacted by "
        "AICR's policy (GPU driver, GPU Operator, DRA driver, instance type), which publishing "
        "with `aicr validate --full` would settle"
    )
    assert result.covered
    assert result.settle == [
        "GPU driver, GPU Operator, DRA driver, instance type: redacted by AICR's policy in the "
        "evidence; publish it with `aicr validate --full` to record them"
    ]


def test_a_redacted_bundle_that_differs_where_it_records_is_not_covered(
    example_recipe: Recipe,
) -> None:
    publish(example_recipe, full_snapshot(kernel="6.8.0-1030-aws"), redact=True)
    result = check_snapshot(as_yaml(full_snapshot()), STATED)
    (match,) = result.evidence
    assert match.differs == ["kernel"]
    assert "instance_type" in match.redacted
    assert result.verdict == "validated on a different tuple (kernel differs)"
    assert not result.covered


def test_it_says_not_validated_without_counted_evidence(example_recipe: Recipe) -> None:
    evidence = publish(example_recipe, full_snapshot())
    Evidence.objects.filter(pk=evidence.pk).update(is_simulated=True)
    result = check_snapshot(as_yaml(full_snapshot()), STATED)
    assert result.evidence == []
    assert result.verdict == f"not validated: no counted evidence for {example_recipe.name}"


def test_it_reports_failing_readiness_constraints_with_expected_and_actual(
    example_recipe: Recipe,
) -> None:
    publish(example_recipe, full_snapshot())
    old = full_snapshot(k8s="v1.31.2")
    result = check_snapshot(as_yaml(old), STATED)
    failing = [c for c in result.constraints if not c.ok]
    assert [(c.name, c.expected, c.actual) for c in failing] == [
        ("K8s.server.version", ">= 1.32.4", "v1.31.2")
    ]
    # Snapshot mode excluded the only overlay for these criteria (AICR step 11): no recipe.
    assert result.recipe is None
    assert result.verdict == (
        "not validated: the snapshot fails the recipe's constraints "
        "(K8s.server.version expected >= 1.32.4, got v1.31.2)"
    )
    assert not result.covered


def test_it_checks_aicrs_example_snapshots(example_recipe: Recipe) -> None:
    for path in (SNAPSHOT_EXAMPLE, MOCK_SNAPSHOT):
        result = check_snapshot(path.read_bytes(), EXAMPLE_CRITERIA)
        assert result.recipe == "h100-eks-ubuntu-training-kubeflow", path
        assert result.criteria["os"] == "ubuntu"
        assert result.verdict == "not validated: no counted evidence for " + result.recipe
    # The example bundle's snapshot is redacted: no kernel reading, so the os-ubuntu mixin's
    # kernel constraint cannot hold and snapshot mode excludes the ubuntu leaf, as AICR does.
    redacted = check_snapshot(
        (EVIDENCE_EXAMPLE_BUNDLE / "snapshot.yaml").read_bytes(), EXAMPLE_CRITERIA
    )
    assert redacted.recipe is None
    assert redacted.verdict == (
        "not validated: the snapshot fails the recipe's constraints (measurement "
        "OS.sysctl./proc/sys/kernel/osrelease not found in snapshot)"
    )
    example = check_snapshot(SNAPSHOT_EXAMPLE.read_bytes(), EXAMPLE_CRITERIA)
    assert example.identity["kernel"] == "6.8.0-1015-aws"
    assert example.identity["gpu_operator"] == "v25.10.1"
    assert example.identity["gpu_model"] is None  # the example has no GPU readings
    assert all(c.ok for c in example.constraints)


def test_it_explains_why_no_recipe_applies_with_aicrs_completions() -> None:
    result = check_snapshot(SNAPSHOT_EXAMPLE.read_bytes(), {})
    assert result.recipe is None
    assert result.resolution_error.startswith("os 'ubuntu' requires additional criteria")
    assert "service=eks, accelerator=h100, intent=training" in result.valid_completions["os"]
    assert result.verdict.startswith("not validated: no recipe applies (os 'ubuntu'")


def test_it_reports_overlays_excluded_by_the_snapshot() -> None:
    result = check_snapshot(as_yaml(full_snapshot(kernel="5.15.0-1019-aws")), STATED)
    assert result.recipe is None
    assert result.excluded_overlays == [
        {"name": "h100-eks-ubuntu-training-kubeflow", "reason": "mixin-constraint-failed"}
    ]


def test_it_refuses_an_unknown_criteria_value_naming_it() -> None:
    with pytest.raises(CheckInputError, match="windows"):
        check_snapshot(as_yaml(full_snapshot()), {"os": "windows"})


def test_it_checks_a_snapshot_the_simulator_takes(example_recipe: Recipe) -> None:
    from tests.k8s_sim.scenarios import HEALTHY
    from tests.k8s_sim.snapshot import snapshot_yaml

    text = snapshot_yaml(HEALTHY, agent_version="v0.19.0")
    result = check_snapshot(text, STATED)
    assert result.recipe == example_recipe.name
    assert result.criteria_origin["service"] == "snapshot"
    assert result.identity["k8s_version"] == "1.33.5"
    assert result.identity["instance_type"] is not None
    assert all(c.ok for c in result.constraints), result.constraints


def test_it_reads_each_evidence_identity_once(
    example_recipe: Recipe, django_assert_max_num_queries
) -> None:  # type: ignore[no-untyped-def]
    for i in range(3):
        publish(
            example_recipe,
            full_snapshot(),
            lab=f"lab-{i}",
            attested_at=datetime.now(UTC).replace(microsecond=0) - timedelta(hours=i),
        )
    text = as_yaml(full_snapshot())
    check_snapshot(text, STATED)  # reads the three bundles, caches their identities
    with django_assert_max_num_queries(6):
        warm = check_snapshot(text, STATED)
    assert warm.verdict == "validated on this exact tuple by 3 signers"


def _aks_snapshot(gpu_driver: str) -> dict:
    snapshot = full_snapshot(k8s="v1.34.2")
    snapshot["measurements"][0]["subtypes"][1]["data"]["provider"] = "azure"
    snapshot["measurements"][0]["subtypes"].append(
        {"subtype": "aks-gpu-pools", "data": {"gpu-driver": gpu_driver}}
    )
    return snapshot


def test_it_counts_evidence_of_the_default_profile_variant_for_the_leaf(real_catalog) -> None:  # type: ignore[no-untyped-def]
    variant = Recipe.objects.get(
        catalog=real_catalog, name="h100-aks-ubuntu-training-kubeflow-gpustack-azure-managed"
    )
    assert variant.is_default_profile
    publish(variant, _aks_snapshot("Install"))
    result = check_snapshot(as_yaml(_aks_snapshot("Install")), STATED)
    assert result.recipe == "h100-aks-ubuntu-training-kubeflow"
    assert [c.name for c in result.constraints if not c.ok] == []
    assert result.verdict == "validated on this exact tuple by 1 signer"


def test_it_checks_a_selected_profile_against_its_own_variant(real_catalog) -> None:  # type: ignore[no-untyped-def]
    default = Recipe.objects.get(
        catalog=real_catalog, name="h100-aks-ubuntu-training-kubeflow-gpustack-azure-managed"
    )
    publish(default, _aks_snapshot("Install"))
    result = check_snapshot(
        as_yaml(_aks_snapshot("None")), STATED, profile="gpuStack=operator-managed"
    )
    assert result.recipe == "h100-aks-ubuntu-training-kubeflow-gpustack-operator-managed"
    # The default variant's evidence is another recipe: it does not cover this one.
    assert result.evidence == []
    default_answer = check_snapshot(as_yaml(_aks_snapshot("None")), STATED)
    failing = [(c.name, c.expected, c.actual) for c in default_answer.constraints if not c.ok]
    assert failing == [("K8s.aks-gpu-pools.gpu-driver", "Install", "None")]
    assert default_answer.verdict.startswith("readiness constraints fail (K8s.aks-gpu-pools")


def test_aicrs_own_redacted_example_bundle_reports_redacted_identities_as_redacted(
    example_recipe: Recipe,
) -> None:
    """AICR's example bundle (``pkg/evidence/attestation.Emit``, minimal policy), stored with
    its own bytes and the identities ingest records from them, checked with the snapshot it was
    emitted from: what the redaction removed is "redacted", never a difference."""
    files = example_files()
    predicate = json.loads(files["summary-bundle/statement.intoto.json"])["predicate"]
    stored = EvidenceFactory(
        recipe=example_recipe,
        container=Container.SUMMARY_BUNDLE,
        content=tarball(files),
        predicate=predicate,
        aicr_version=predicate["aicrVersion"],
        subject_digest=predicate["recipe"]["digest"],
    )
    result = check_snapshot(SNAPSHOT_EXAMPLE.read_bytes(), EXAMPLE_CRITERIA)
    (match,) = result.evidence
    assert match.id == stored.pk
    assert match.differs == []
    assert {"kernel", "gpu_operator", "dra_driver"} <= set(match.redacted)
    assert not set(match.redacted) & set(match.matches)
    assert {"k8s_version", "os", "os_version", "aicr_version"} <= set(match.matches)
    assert "redacted by AICR's policy" in result.verdict
    assert result.covered, result.verdict


# --- identity changes between the snapshot and the evidence, as named reasons --------------------


def test_each_identity_the_snapshot_changed_is_a_named_reason(example_recipe: Recipe) -> None:
    publish(example_recipe, full_snapshot(driver="570.86.15", kernel="6.8.0-1030-aws"))
    (match,) = check_snapshot(as_yaml(full_snapshot()), STATED).evidence
    assert sorted(match.differs) == ["driver", "kernel"]
    assert sorted(r["detail"] for r in match.reasons) == [
        "GPU driver changed from 570.86.15 to 580.95.05",
        "kernel changed from 6.8.0-1030-aws to 6.8.0-1015-aws",
    ]
    assert {r["code"] for r in match.reasons} == {"identity-changed"}


def test_a_matching_or_redacted_identity_is_no_reason(example_recipe: Recipe) -> None:
    publish(example_recipe, full_snapshot(), lab="lab-a")
    publish(example_recipe, full_snapshot(), lab="lab-b", redact=True)
    result = check_snapshot(as_yaml(full_snapshot()), STATED)
    assert len(result.evidence) == 2
    assert any(e.redacted for e in result.evidence)
    assert [e.reasons for e in result.evidence] == [[], []]


def test_a_record_of_another_plan_names_the_plan_first(example_recipe: Recipe) -> None:
    stored = publish(example_recipe, full_snapshot(driver="570.86.15"))
    Evidence.objects.filter(pk=stored.pk).update(subject_digest="f" * 64)
    (match,) = check_snapshot(as_yaml(full_snapshot()), STATED).evidence
    assert [r["detail"] for r in match.reasons] == [
        "plan (the recipe's digest) changed from sha256:" + "f" * 64 + " to sha256:"
        f"{example_recipe.digest}",
        "GPU driver changed from 570.86.15 to 580.95.05",
    ]


def test_the_api_returns_the_reasons(client, example_recipe: Recipe) -> None:  # type: ignore[no-untyped-def]
    publish(example_recipe, full_snapshot(driver="570.86.15"))
    body = json.dumps({"snapshot": as_yaml(full_snapshot()), **STATED})
    response = client.post("/api/v1/check/", data=body, content_type="application/json")
    assert response.status_code == 200
    (evidence,) = response.json()["evidence"]
    assert evidence["reasons"] == [
        {"code": "identity-changed", "detail": "GPU driver changed from 570.86.15 to 580.95.05"}
    ]


def test_records_sharing_a_tuple_share_one_identity_key_and_compare_alike(
    example_recipe: Recipe,
) -> None:
    publish(example_recipe, full_snapshot(driver="570.86.15"), lab="lab-a")
    publish(example_recipe, full_snapshot(driver="570.86.15"), lab="lab-b")
    publish(example_recipe, full_snapshot(), lab="lab-c")
    keys = set(Evidence.objects.values_list("identity_key", flat=True))
    assert len(keys) == 2
    assert "" not in keys
    result = check_snapshot(as_yaml(full_snapshot()), STATED)
    assert sorted(e.differs for e in result.evidence) == [[], ["driver"], ["driver"]]


def test_a_row_stored_without_an_identity_key_is_compared_from_its_own_identities(
    example_recipe: Recipe,
) -> None:
    publish(example_recipe, full_snapshot(driver="570.86.15"), lab="lab-a")
    publish(example_recipe, full_snapshot(), lab="lab-b")
    Evidence.objects.update(identity_key="")
    result = check_snapshot(as_yaml(full_snapshot()), STATED)
    assert sorted(e.differs for e in result.evidence) == [[], ["driver"]]


def test_migration_0014_fills_the_identity_keys(example_recipe: Recipe) -> None:
    import importlib

    from django.apps import apps

    stored = publish(example_recipe, full_snapshot())
    expected = Evidence.objects.get(pk=stored.pk).identity_key
    Evidence.objects.update(identity_key="")
    migration = importlib.import_module(
        "evidence_app.migrations.0014_release_profiles_identity_key"
    )
    migration.fill_identity_keys(apps, None)
    assert Evidence.objects.get(pk=stored.pk).identity_key == expected != ""
