"""Every endpoint by anonymous / contributor / auditor / maintainer: the status each gets.

Reads of recipes, evidence, signers and the published dashboard data are public; uploads need
a contributor or maintainer; withdrawing someone else's evidence a maintainer; upload status
its uploader, an auditor or a maintainer (another contributor: 403); exports an auditor or
maintainer; registered keys are listed by an auditor or maintainer and registered by a
maintainer. Clusters are read by auditors and maintainers (a server address says where the GPU
infrastructure is) and written, tested, validated on and cancelled by maintainers; runs are
read by anyone; the snapshot check is public. A new route fails
``test_every_api_route_is_in_the_matrix`` until it is added."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from django.contrib.auth.models import User
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from evidence_app.models import Evidence, ExportJob, UploadLog
from evidence_app.releases.declare import release_declare
from evidence_app.services.tokens import token_create, user_with_role
from recipes_app.models import Catalog, Recipe
from tests.evidence_factories import EvidenceFactory
from tests.oci_registry import free_port
from tests.validators_app.conftest import (  # noqa: F401 (autouse fixtures)
    _no_cluster_test_throttle,
    cluster_keys,
)
from tests.validators_app.kubeconfigs import kubeconfig
from validators_app.models import RunStatus, ValidationRun
from validators_app.services.clusters import cluster_register

ROLES = ("anonymous", "contributor", "auditor", "maintainer")
ALL_200 = (200, 200, 200, 200)
EXPORT = (401, 403, 200, 200)
CLUSTER_READ = (401, 403, 200, 200)
MAINTAINER_WRITE_BAD_BODY = (401, 403, 403, 400)

# (route name, method, path template, body, statuses in ROLES order)
MATRIX: list[tuple[str, str, str, dict[str, Any] | None, tuple[int, ...]]] = [
    ("api:api-root", "get", "/api/v1/", None, ALL_200),
    ("api:recipe-list", "get", "/api/v1/recipes/", None, ALL_200),
    ("api:recipe-detail", "get", "/api/v1/recipes/{recipe}/", None, ALL_200),
    ("api:recipe-resolved-yaml", "get", "/api/v1/recipes/{recipe}/resolved.yaml", None, ALL_200),
    ("api:recipe-query", "get", "/api/v1/query/?service=eks&accelerator=h100", None, ALL_200),
    ("api:evidence-list", "get", "/api/v1/evidence/", None, ALL_200),
    ("api:evidence-list", "post", "/api/v1/evidence/", {}, (401, 400, 403, 400)),
    ("api:evidence-detail", "get", "/api/v1/evidence/{evidence}/", None, ALL_200),
    ("api:evidence-bundle", "get", "/api/v1/evidence/{evidence}/bundle", None, ALL_200),
    (
        "api:evidence-withdraw",
        "post",
        "/api/v1/evidence/{evidence}/withdraw",
        {"reason": "matrix"},
        (401, 403, 403, 200),
    ),
    ("api:upload-detail", "get", "/api/v1/uploads/{upload}/", None, (401, 403, 200, 200)),
    ("api:signer-list", "get", "/api/v1/signers/", None, ALL_200),
    ("api:pointer-list", "get", "/api/v1/pointers/?state=pending", None, ALL_200),
    ("api:signer-detail", "get", "/api/v1/signers/{signer}/", None, ALL_200),
    # Registered keys: read by auditors and maintainers, registered by maintainers only.
    ("api:key-list", "get", "/api/v1/keys/", None, (401, 403, 200, 200)),
    ("api:key-list", "post", "/api/v1/keys/", {}, MAINTAINER_WRITE_BAD_BODY),
    ("api:export-ndjson", "get", "/api/v1/export/evidence.ndjson", None, EXPORT),
    ("api:export-csv", "get", "/api/v1/export/evidence.csv", None, EXPORT),
    ("api:export-audit", "get", "/api/v1/export/audit.tar.gz", None, EXPORT),
    # Exports built by a worker: auditors and maintainers ask; each job is its owner's (the
    # maintainer's here: the auditor gets a 404) and downloads only once done (409 before).
    ("api:export-job-list", "get", "/api/v1/exports/", None, EXPORT),
    ("api:export-job-list", "post", "/api/v1/exports/", {}, (401, 403, 400, 400)),
    ("api:export-job-detail", "get", "/api/v1/exports/{export}/", None, (401, 403, 404, 200)),
    (
        "api:export-job-download",
        "get",
        "/api/v1/exports/{export}/download/",
        None,
        (401, 403, 404, 409),
    ),
    # The qualifications table is public like its page (evidence is public to read).
    ("api:qualifications", "get", "/api/v1/qualifications/", None, ALL_200),
    ("api:qualifications-csv", "get", "/api/v1/export/qualifications.csv", None, ALL_200),
    ("api:qualifications-ndjson", "get", "/api/v1/export/qualifications.ndjson", None, ALL_200),
    # Releases: declared by maintainers, read by anyone (like the evidence they rest on).
    ("api:release-list", "get", "/api/v1/releases/", None, ALL_200),
    ("api:release-list", "post", "/api/v1/releases/", {}, MAINTAINER_WRITE_BAD_BODY),
    ("api:release-detail", "get", "/api/v1/releases/{release}/", None, ALL_200),
    ("api:release-profiles", "get", "/api/v1/releases/{release}/profiles/", None, ALL_200),
    ("aicr-dashboard:listing", "get", "/aicr/data/", None, ALL_200),
    ("aicr-dashboard:index", "get", "/aicr/data/index.json", None, ALL_200),
    ("aicr-dashboard:labels", "get", "/aicr/data/labels.json", None, ALL_200),
    ("aicr-dashboard:series", "get", "/aicr/data/series/{recipe}.json", None, ALL_200),
    ("aicrd:recipe", "get", "/v1/recipe?service=eks&accelerator=h100", None, ALL_200),
    (
        "aicrd:query",
        "get",
        "/v1/query?service=eks&accelerator=h100&selector=deploymentOrder",
        None,
        ALL_200,
    ),
    ("api:cluster-list", "get", "/api/v1/clusters/", None, CLUSTER_READ),
    ("api:cluster-list", "post", "/api/v1/clusters/", {}, MAINTAINER_WRITE_BAD_BODY),
    ("api:cluster-detail", "get", "/api/v1/clusters/{cluster}/", None, CLUSTER_READ),
    ("api:cluster-detail", "patch", "/api/v1/clusters/{cluster}/", {}, MAINTAINER_WRITE_BAD_BODY),
    # Nothing listens on the cluster's port: the test answers at once, {"ok": false, ...}.
    ("api:cluster-test", "post", "/api/v1/clusters/{cluster}/test/", {}, (401, 403, 403, 200)),
    ("api:run-list", "get", "/api/v1/runs/", None, ALL_200),
    ("api:run-list", "post", "/api/v1/runs/", {}, MAINTAINER_WRITE_BAD_BODY),
    ("api:run-detail", "get", "/api/v1/runs/{run}/", None, ALL_200),
    ("api:run-ctrf", "get", "/api/v1/runs/{run}/ctrf.json", None, ALL_200),
    # Public like the CTRF; this run was never pushed, so everyone gets the 404 saying why.
    ("api:run-pointer", "get", "/api/v1/runs/{run}/pointer.yaml", None, (404, 404, 404, 404)),
    # The run has ended: a maintainer's cancel is a conflict, everyone else is refused first.
    ("api:run-cancel", "post", "/api/v1/runs/{run}/cancel/", {}, (401, 403, 403, 409)),
    ("api:check", "post", "/api/v1/check/", {}, (400, 400, 400, 400)),
    ("health", "get", "/health", None, ALL_200),
    ("ready", "get", "/ready", None, ALL_200),
    ("metrics", "get", "/metrics", None, ALL_200),
    ("api-schema", "get", "/api/schema/", None, ALL_200),
    # A page, listed because reading evidence is public whoever asks.
    ("evidence:compare", "get", "/evidence/compare/?a={evidence}", None, ALL_200),
    # An upload's result page is its uploader's, signed in on the site (a token is no
    # session): everyone here is sent to sign in (tests/evidence_app/test_views_upload.py).
    ("evidence:upload", "get", "/evidence/uploads/{upload}/", None, (302, 302, 302, 302)),
    # Pages that are public like the API rows above.
    ("recipes:history", "get", "/recipes/{recipe}/history/", None, ALL_200),
    ("recipes:yaml", "get", "/recipes/{recipe}/recipe.yaml", None, ALL_200),
    ("releases:list", "get", "/releases/", None, ALL_200),
    ("releases:detail", "get", "/releases/{release}/", None, ALL_200),
    ("releases:feed", "get", "/releases/{release}/feed.atom", None, ALL_200),
    ("release-badge", "get", "/badges/releases/{release}.svg", None, ALL_200),
    (
        "recipes:history",
        "get",
        "/recipes/{recipe}/history/?cell=operator-health@{evidence}",
        None,
        ALL_200,
    ),
]


def _names(patterns: list[Any], namespace: str = "") -> set[str]:
    names: set[str] = set()
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            inner = f"{namespace}{pattern.namespace}:" if pattern.namespace else namespace
            names |= _names(pattern.url_patterns, inner)
        elif isinstance(pattern, URLPattern) and pattern.name:
            names.add(namespace + pattern.name)
    return names


def test_every_api_route_is_in_the_matrix() -> None:
    machine = {
        name
        for name in _names(get_resolver().url_patterns)
        if name.startswith(("api:", "aicrd:", "aicr-dashboard:"))
        or name in ("health", "ready", "metrics")
    }
    assert machine <= {row[0] for row in MATRIX} | {"api:api-schema"}


@pytest.fixture
def world(real_catalog: Catalog, evidence_db: None, settings: Any) -> dict[str, Any]:
    settings.SITE_SIGNING_KEY = (
        ec.generate_private_key(ec.SECP256R1())
        .private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        .decode()
    )
    recipe = Recipe.objects.get(catalog=real_catalog, name="h100-eks-ubuntu-training-kubeflow")
    uploader = user_with_role(username="uploader", role="contributor")
    evidence: Evidence = EvidenceFactory(recipe=recipe, uploaded_by=uploader)
    upload = UploadLog.objects.create(user=uploader, channel="api", verdict="invalid")
    cluster = cluster_register(
        name="matrix",
        kubeconfig_text=kubeconfig(server=f"http://127.0.0.1:{free_port()}"),
        environment="simulated",
    )
    run = ValidationRun.objects.create(
        cluster=cluster,
        recipe=recipe,
        phases=["deployment"],
        status=RunStatus.PASSED,
        aicr_run_id="20261201-000000-0123456789abcdef",
        ctrf=b'{"reportFormat": "CTRF"}\n',
    )
    release = release_declare(
        {
            "name": "matrix",
            "operator_image": "ghcr.io/o/op@sha256:" + "1" * 64,
            "operator_chart": "ghcr.io/o/chart@sha256:" + "2" * 64,
            "aicr_image": "ghcr.io/o/aicr@sha256:" + "3" * 64,
            "profiles": [recipe.name],
        }
    )
    tokens = {
        role: token_create(user=user_with_role(username=f"m-{role}", role=role), role=role)[1]
        for role in ROLES[1:]
    }
    export = ExportJob.objects.create(
        format="csv",
        site="http://testserver/",
        requested_by=User.objects.get(username="m-maintainer"),
    )
    return {
        "export": export.pk,
        "recipe": recipe.name,
        "evidence": evidence.pk,
        "signer": evidence.signer.slug,
        "upload": upload.pk,
        "cluster": cluster.pk,
        "run": run.pk,
        "release": release.pk,
        "tokens": tokens,
    }


@pytest.mark.parametrize(
    ("name", "method", "template", "body", "statuses"),
    MATRIX,
    ids=[f"{row[1]} {row[2]}" for row in MATRIX],
)
@pytest.mark.parametrize("role_index", range(len(ROLES)), ids=ROLES)
def test_each_role_gets_its_status(
    world: dict[str, Any],
    name: str,
    method: str,
    template: str,
    body: dict[str, Any] | None,
    statuses: tuple[int, ...],
    role_index: int,
) -> None:
    role = ROLES[role_index]
    client = Client()
    if role != "anonymous":
        client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {world['tokens'][role]}"
    path = template.format(**{k: v for k, v in world.items() if k != "tokens"})
    send: Callable[..., Any] = getattr(client, method)
    response = send(path, body, content_type="application/json") if body is not None else send(path)
    assert response.status_code == statuses[role_index], (role, path, response.content[:300])
