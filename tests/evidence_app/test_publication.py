"""``/aicr/data/index.json`` and ``/aicr/data/series/<recipe>.json``: the stored evidence in
AICR's dashboard format, equal byte for byte to what AICR's generator (the port that reproduces
the Go tool's golden output) writes from the same runs laid out as AICR's evidence tree."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client

from evidence_app.corroborate import generate, marshal
from evidence_app.corroborate.intake import RUN_META_SCHEMA_VERSION
from evidence_app.exports.publication import KEY_ISSUER
from evidence_app.models import Evidence
from evidence_app.services import demo
from evidence_app.services.withdrawal import evidence_withdraw

INDEX = "/aicr/data/index.json"


@pytest.fixture
def seeded(real_catalog: Any, evidence_db: None) -> list[Evidence]:
    cache.clear()
    demo.seed_demo()
    return list(Evidence.objects.select_related("signer", "signer__key", "recipe").order_by("pk"))


def _as_aicr_tree(evidence: list[Evidence], root: Path) -> None:
    """Each run as AICR's ingest job stores it: ``<source>/<run>/meta.json`` + ``ctrf/``."""
    for e in evidence:
        if e.withdrawn_at is not None or e.is_simulated:
            continue
        recipe, signer = e.recipe, e.signer
        tab = recipe.intent + (f"-{recipe.platform}" if recipe.platform not in ("", "any") else "")
        run_dir = root / signer.slug / e.sha256[:16]
        (run_dir / "ctrf").mkdir(parents=True)
        meta = {
            "schemaVersion": RUN_META_SCHEMA_VERSION,
            "coordinate": {
                "group": recipe.service,
                "dashboard": f"{recipe.accelerator}-{recipe.os or 'any'}",
                "tab": tab,
            },
            "recipe": e.recipe_name,
            "signer": {
                "idHash": signer.source_id,
                "identity": f"sha256:{signer.key.fingerprint}"
                if signer.key_id
                else signer.identity,
                "issuer": KEY_ISSUER if signer.key_id else signer.issuer,
                "class": signer.signer_class,
                "allowlisted": signer.counted,
            },
            "runId": e.sha256[:16],
            "attestedAt": e.attested_at.isoformat().replace("+00:00", "Z"),
            "aicrVersion": e.aicr_version,
            "k8sVersion": e.k8s_version,
            "evidenceRef": f"/api/v1/evidence/{e.pk}/bundle",
            "bundleDigest": f"sha256:{e.sha256}",
            "rekorLogIndex": e.rekor_log_index,
        }
        (run_dir / "meta.json").write_text(json.dumps(meta))
        for phase, checks in e.check_results.items():
            tests = [{"name": name, "status": c["status"]} for name, c in checks.items()]
            (run_dir / "ctrf" / f"{phase}.json").write_text(
                json.dumps({"results": {"tool": {"name": "t"}, "summary": {}, "tests": tests}})
            )


def test_it_serves_what_aicrs_generator_writes_from_the_same_runs(
    client: Client, seeded: list[Evidence], tmp_path: Path
) -> None:
    _as_aicr_tree(seeded, tmp_path / "tree")
    expected = generate(tmp_path / "tree")

    response = client.get(INDEX)

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.content == marshal(expected.index)
    index = json.loads(response.content)
    assert index["schema"] == "aicr-corroboration/v1"
    assert index["meta"]["counts"]["recipes"] == demo.RECIPE_COUNT
    assert set(expected.series) == {e.recipe_name for e in seeded}
    for name, series in expected.series.items():
        got = client.get(f"/aicr/data/series/{name}.json")
        assert got.status_code == 200
        assert got.content == marshal(series), name


def test_it_refreshes_when_evidence_changes_and_answers_304_otherwise(
    client: Client, seeded: list[Evidence]
) -> None:
    first = client.get(INDEX)
    again = client.get(INDEX, HTTP_IF_NONE_MATCH=first["ETag"])
    assert again.status_code == 304

    newest = max(seeded, key=lambda e: e.attested_at)
    evidence_withdraw(evidence=newest, by=None, roles={"maintainer"}, reason="bad run")
    after = client.get(INDEX, HTTP_IF_NONE_MATCH=first["ETag"])

    assert after.status_code == 200
    assert after["ETag"] != first["ETag"]
    assert after.content != first.content


def test_it_reads_from_the_cache_with_two_queries_when_nothing_changed(
    client: Client, seeded: list[Evidence], django_assert_max_num_queries: Callable[..., Any]
) -> None:
    client.get(INDEX)
    with django_assert_max_num_queries(2):
        assert client.get(INDEX).status_code == 200


@pytest.mark.parametrize("name", ["no-such-recipe", "..", "%2e%2e", "a" * 300])
def test_it_answers_404_for_a_series_it_does_not_have(
    client: Client, seeded: list[Evidence], name: str
) -> None:
    response = client.get(f"/aicr/data/series/{name}.json")
    assert response.status_code == 404


def test_it_publishes_an_empty_index_without_evidence(client: Client, evidence_db: None) -> None:
    cache.clear()
    index = json.loads(client.get(INDEX).content)
    assert index["meta"]["counts"] == {"recipes": 0, "csps": 0, "sources": 0}
    assert client.post(INDEX).status_code == 405
