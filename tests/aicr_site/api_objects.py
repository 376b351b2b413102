"""Objects the API tests read through lists and details."""

from __future__ import annotations

from dataclasses import dataclass

from evidence_app.models import Evidence, Release
from evidence_app.releases.declare import release_declare
from recipes_app.models import Recipe
from tests.evidence_factories import EvidenceFactory
from tests.validators_app.kubeconfigs import kubeconfig
from validators_app.models import Cluster, PushState, RunOciPublication, RunStatus, ValidationRun
from validators_app.services.clusters import cluster_register


@dataclass
class ApiObjects:
    recipe: Recipe
    evidence: Evidence
    cluster: Cluster
    run: ValidationRun
    release: Release


def api_objects_make(catalog: object) -> ApiObjects:
    """One of each thing the API lists: a recipe, evidence (and its signer), a cluster, a run."""
    recipe = Recipe.objects.filter(catalog=catalog).order_by("name").first()
    assert recipe is not None
    evidence = EvidenceFactory(recipe=recipe)
    cluster = cluster_register(name="api", kubeconfig_text=kubeconfig(), environment="simulated")
    run = ValidationRun.objects.create(
        cluster=cluster,
        recipe=recipe,
        phases=["deployment"],
        status=RunStatus.PASSED,
        aicr_run_id="20261201-000000-00000000000000aa",
        ctrf=b'{"reportFormat": "CTRF"}\n',
    )
    digest = "sha256:" + "ab" * 32
    RunOciPublication.objects.create(
        run=run,
        state=PushState.PUSHED,
        repository="registry.example/aicr-evidence",
        reference=f"registry.example/aicr-evidence:{recipe.name}-{run.aicr_run_id}",
        oci_ref=f"registry.example/aicr-evidence@{digest}",
        referrer_digest="sha256:" + "cd" * 32,
        keyless=True,
        pointer_path=f"recipes/evidence/{recipe.name}/{'0' * 32}/sha256-{'ab' * 32}.yaml",
        pointer_yaml=f"recipe: {recipe.name}\nschemaVersion: 1.0.0\n",
    )
    release = release_declare(
        {
            "name": "api",
            "operator_image": "ghcr.io/o/op@sha256:" + "1" * 64,
            "operator_chart": "ghcr.io/o/chart@sha256:" + "2" * 64,
            "aicr_image": "ghcr.io/o/aicr@sha256:" + "3" * 64,
            "profiles": [recipe.name],
        }
    )
    return ApiObjects(recipe=recipe, evidence=evidence, cluster=cluster, run=run, release=release)
