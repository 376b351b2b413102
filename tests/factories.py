"""factory_boy factories shared by the tests."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import factory
from django.utils import timezone

from evidence_app.consensus import stored
from recipes_app.models import Catalog, Recipe, RecipeChange
from recipes_app.services import check_set_digest


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class CatalogFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Catalog

    source = "tests"
    aicr_version = "dev"
    content_digest = factory.Sequence(lambda n: _sha(f"catalog-{n}"))
    files = factory.LazyFunction(dict)
    file_count = 0


class RecipeFactory(factory.django.DjangoModelFactory):
    """A small but well-formed recipe row (the real ones come from import_catalog)."""

    class Meta:
        model = Recipe
        skip_postgeneration_save = True

    catalog = factory.SubFactory(CatalogFactory)
    name = factory.Sequence(lambda n: f"h100-eks-ubuntu-training-{n}")
    leaf = factory.LazyAttribute(lambda o: o.name)
    service = "eks"
    accelerator = "h100"
    os = "ubuntu"
    intent = "training"
    platform = "any"
    coordinate = "eks/h100-ubuntu/training"
    api_version = "aicr.run/v1alpha2"
    applied_overlays = factory.LazyFunction(lambda: ["base", "eks"])
    deployment_order = factory.LazyFunction(lambda: ["cert-manager", "gpu-operator"])
    components = factory.LazyFunction(
        lambda: [
            {
                "name": "cert-manager",
                "type": "Helm",
                "version": "v1.20.2",
                "namespace": "cert-manager",
                "dependencyRefs": [],
                "enabled": True,
            },
            {
                "name": "gpu-operator",
                "type": "Helm",
                "version": "v26.3.3",
                "namespace": "gpu-operator",
                "dependencyRefs": ["cert-manager"],
                "enabled": True,
            },
        ]
    )
    constraints = factory.LazyFunction(
        lambda: [{"name": "K8s.server.version", "value": ">= 1.32.4"}]
    )
    checks = factory.LazyFunction(
        lambda: {
            "deployment": [{"name": "operator-health", "thresholds": []}],
            "performance": [
                {
                    "name": "nccl-all-reduce-bw",
                    "thresholds": [{"name": "nccl-all-reduce-bw", "value": ">= 300"}],
                }
            ],
        }
    )
    check_count = 2
    component_count = 2
    deterministic_yaml = factory.LazyAttribute(lambda o: f"kind: RecipeResult\nname: {o.name}\n")
    canonical_yaml = factory.LazyAttribute(lambda o: f"kind: RecipeResult\nname: {o.name}\n")
    digest = factory.LazyAttribute(lambda o: _sha(o.canonical_yaml))
    parity_digest = factory.LazyAttribute(lambda o: _sha(o.deterministic_yaml))
    change = RecipeChange.NEW
    search_text = factory.LazyAttribute(
        lambda o: f"{o.name} {o.service} {o.accelerator} {o.os} {o.intent} {o.platform}".lower()
    )

    @factory.post_generation
    def stored_consensus(self, create: bool, extracted: object, **kwargs: object) -> None:
        """What a catalog import does once its recipes are stored: refresh every stored
        consensus badge (the current catalog moved)."""
        if create:
            stored.catalog_changed()


def older_catalog_recipe(recipe: Recipe, *, extra_checks: tuple[str, ...] = ()) -> Recipe:
    """``recipe``'s row (same name and digests) in an older catalog whose validator check set
    is the current one plus ``extra_checks`` minus nothing: evidence bound to it differs from
    the current catalog in its check set alone (validator-catalog-outdated, nothing else)."""
    checks = sorted({*recipe.catalog.validator_checks, *extra_checks})
    older = RecipeFactory(
        catalog=CatalogFactory(
            validator_checks=checks, validator_checks_digest=check_set_digest(checks)
        ),
        name=recipe.name,
        digest=recipe.digest,
        digest_v3=recipe.digest_v3,
    )
    Catalog.objects.filter(pk=older.catalog_id).update(
        imported_at=timezone.now() - timedelta(days=400)
    )
    return older
