"""Objects the API tests read through lists and details."""

from __future__ import annotations

from dataclasses import dataclass

from evidence_app.models import Evidence
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
    return ApiObjects(recipe=recipe, evidence=evidence, cluster=cluster, run=run)
