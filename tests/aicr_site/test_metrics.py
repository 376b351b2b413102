"""``/metrics``: Prometheus text with request counts and latencies, evidence by verdict,
ingest outcomes, upload states, validation runs by status and (with Redis) Celery queue
lengths."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from prometheus_client.parser import text_string_to_metric_families

from evidence_app.models import UploadLog
from recipes_app.models import Recipe
from tests.evidence_factories import EvidenceFactory
from tests.validators_app.kubeconfigs import kubeconfig
from validators_app.models import RunStatus, ValidationRun
from validators_app.services.clusters import cluster_register

pytestmark = pytest.mark.django_db


def _samples(client: Client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def test_it_counts_requests_by_route_and_status(client: Client) -> None:
    before = _samples(client)
    key = ("http_requests_total", (("method", "GET"), ("route", "health"), ("status", "200")))
    client.get("/health")
    client.get("/health")
    client.get("/api/v1/evidence/999999/")
    after = _samples(client)

    assert after[key] - before.get(key, 0) == 2
    missing = (
        "http_requests_total",
        (("method", "GET"), ("route", "api:evidence-detail"), ("status", "404")),
    )
    assert after[missing] - before.get(missing, 0) == 1
    count = ("http_request_duration_seconds_count", (("method", "GET"), ("route", "health")))
    assert after[count] - before.get(count, 0) == 2


def test_it_reports_evidence_ingest_outcomes_and_queue_depth(
    client: Client, real_catalog: object
) -> None:
    recipe = Recipe.objects.filter(catalog=real_catalog).first()
    EvidenceFactory.create_batch(3, recipe=recipe)
    EvidenceFactory(recipe=recipe, is_simulated=True)
    UploadLog.objects.create(channel="api", verdict="invalid")
    UploadLog.objects.create(channel="api", verdict="invalid")
    UploadLog.objects.create(channel="oci", state="pending")

    samples = _samples(client)

    assert samples[("aicr_evidence_records", (("counted", "true"), ("verdict", "verified")))] == 3
    assert samples[("aicr_evidence_records", (("counted", "false"), ("verdict", "verified")))] == 1
    assert samples[("aicr_ingest_outcomes", (("verdict", "invalid"),))] == 2
    assert samples[("aicr_uploads", (("state", "pending"),))] == 1


def test_it_reports_validation_runs_by_status_in_one_query(
    client: Client, real_catalog: object
) -> None:
    recipe = Recipe.objects.filter(catalog=real_catalog).first()
    cluster = cluster_register(
        name="metrics", kubeconfig_text=kubeconfig(), environment="simulated"
    )
    statuses = [RunStatus.PASSED] * 3 + [RunStatus.FAILED, RunStatus.QUEUED]  # one active a cluster
    for i, status in enumerate(statuses):
        ValidationRun.objects.create(
            cluster=cluster,
            recipe=recipe,
            phases=["deployment"],
            status=status,
            aicr_run_id=f"20261201-000000-{i:016x}",
        )

    samples = _samples(client)
    assert samples[("aicr_validation_runs", (("status", "passed"),))] == 3
    assert samples[("aicr_validation_runs", (("status", "failed"),))] == 1
    assert samples[("aicr_validation_runs", (("status", "queued"),))] == 1
    assert samples[("aicr_validation_runs", (("status", "cancelled"),))] == 0

    with CaptureQueriesContext(connection) as queries:
        _samples(client)
    run_queries = [q["sql"] for q in queries if "validators_app_validationrun" in q["sql"]]
    assert len(run_queries) == 1, run_queries
    assert "GROUP BY" in run_queries[0]
