"""``/aicr/data/index.json`` and ``/aicr/data/series/<recipe>.json``: the stored evidence in
AICR's dashboard format, equal byte for byte to what AICR's generator (the port that reproduces
the Go tool's golden output) writes from the same runs laid out as AICR's evidence tree. Demo
and simulated runs are left out unless ``?include=`` asks, and then come as zero-weight
sources that ``labels.json`` names; ``/aicr/data/`` lists what is there."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client

from evidence_app.corroborate import generate, marshal, source_id
from evidence_app.corroborate.intake import RUN_META_SCHEMA_VERSION
from evidence_app.exports.publication import KEY_ISSUER, sample_issuer, sample_kinds
from evidence_app.models import Evidence
from evidence_app.services import demo
from evidence_app.services.withdrawal import evidence_withdraw

INDEX = "/aicr/data/index.json"


@pytest.fixture
def seeded(real_catalog: Any, evidence_db: None) -> list[Evidence]:
    cache.clear()
    demo.seed_demo()
    return list(Evidence.objects.select_related("signer", "signer__key", "recipe").order_by("pk"))


@pytest.fixture
def seeded_as_real(seeded: list[Evidence]) -> list[Evidence]:
    """The demo's evidence with its demo mark taken off: published by default."""
    Evidence.objects.update(is_demo=False)
    return list(Evidence.objects.select_related("signer", "signer__key", "recipe").order_by("pk"))


def _as_aicr_tree(
    evidence: list[Evidence], root: Path, include: frozenset[str] = frozenset()
) -> None:
    """Each run as AICR's ingest job stores it: ``<source>/<run>/meta.json`` + ``ctrf/``; a demo
    or simulated run only when ``include`` names its kind, as its own unlisted source."""
    for e in evidence:
        kinds = sample_kinds(e)
        if e.withdrawn_at is not None or not set(kinds) <= include:
            continue
        recipe, signer = e.recipe, e.signer
        identity = f"sha256:{signer.key.fingerprint}" if signer.key_id else signer.identity
        issuer = KEY_ISSUER if signer.key_id else signer.issuer
        if kinds:
            issuer = sample_issuer(kinds, issuer)
        source = source_id(issuer, identity) if kinds else signer.source_id
        tab = recipe.intent + (f"-{recipe.platform}" if recipe.platform not in ("", "any") else "")
        run_dir = root / source / e.sha256[:16]
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
                "idHash": source,
                "identity": identity,
                "issuer": issuer,
                "class": signer.signer_class,
                "allowlisted": signer.counted and not kinds,
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
    client: Client, seeded_as_real: list[Evidence], tmp_path: Path
) -> None:
    seeded = seeded_as_real
    assert not any(e.is_demo for e in seeded)
    _as_aicr_tree(seeded, tmp_path / "tree")
    expected = generate(tmp_path / "tree")

    response = client.get(INDEX)

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.content == marshal(expected.index)
    index = json.loads(response.content)
    assert index["schema"] == "aicr-corroboration/v1"
    assert index["meta"]["counts"]["recipes"] == demo.RECIPE_COUNT
    assert set(expected.series) == {e.recipe_name for e in seeded if not e.is_simulated}
    for name, series in expected.series.items():
        got = client.get(f"/aicr/data/series/{name}.json")
        assert got.status_code == 200
        assert got.content == marshal(series), name


@pytest.mark.parametrize("query", ["", "?include=demo,simulated"])
def test_it_refreshes_when_evidence_changes_and_answers_304_otherwise(
    client: Client, seeded_as_real: list[Evidence], query: str
) -> None:
    seeded = seeded_as_real
    Evidence.objects.filter(pk=seeded[0].pk).update(is_demo=True)  # one of each, included
    first = client.get(INDEX + query)
    again = client.get(INDEX + query, HTTP_IF_NONE_MATCH=first["ETag"])
    assert again.status_code == 304

    published = [e for e in seeded[1:] if not e.is_simulated]  # in both publications
    newest = max(published, key=lambda e: e.attested_at)
    evidence_withdraw(evidence=newest, by=None, roles={"maintainer"}, reason="bad run")
    after = client.get(INDEX + query, HTTP_IF_NONE_MATCH=first["ETag"])

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


@pytest.fixture
def mixed(seeded_as_real: list[Evidence]) -> dict[str, list[Evidence]]:
    """Real evidence, three demo runs and three simulated ones (the demo seeds none)."""
    live = [e for e in seeded_as_real if e.withdrawn_at is None and e.verdict == "verified"]
    Evidence.objects.filter(pk__in=[e.pk for e in live[:3]]).update(is_demo=True)
    Evidence.objects.filter(pk__in=[e.pk for e in live[3:6]]).update(is_simulated=True)
    rows = list(Evidence.objects.select_related("signer", "signer__key", "recipe").order_by("pk"))
    return {
        "all": rows,
        "demo": [e for e in rows if e.is_demo],
        "simulated": [e for e in rows if e.is_simulated],
    }


def _everything_published(client: Client, query: str) -> bytes:
    index = client.get(INDEX + query).content
    listing = json.loads(client.get("/aicr/data/" + query).content)
    return index + b"".join(client.get(entry["url"]).content for entry in listing["series"])


def test_demo_and_simulated_runs_are_left_out_by_default(
    client: Client, mixed: dict[str, list[Evidence]], tmp_path: Path
) -> None:
    _as_aicr_tree(mixed["all"], tmp_path / "tree")
    expected = generate(tmp_path / "tree")

    assert client.get(INDEX).content == marshal(expected.index)
    published = _everything_published(client, "")
    for sample in mixed["demo"] + mixed["simulated"]:
        assert f"/api/v1/evidence/{sample.pk}/bundle".encode() not in published
    assert json.loads(client.get("/aicr/data/labels.json").content)["sources"] == {}
    assert json.loads(client.get("/aicr/data/").content)["leftOut"] == {"demo": 3, "simulated": 3}


@pytest.mark.parametrize("include", ["demo", "simulated", "demo,simulated", "simulated, demo"])
def test_included_samples_are_zero_weight_sources_named_in_labels(
    client: Client, mixed: dict[str, list[Evidence]], tmp_path: Path, include: str
) -> None:
    kinds = frozenset(k.strip() for k in include.split(","))
    _as_aicr_tree(mixed["all"], tmp_path / "tree", kinds)
    expected = generate(tmp_path / "tree")
    query = f"?include={include}"

    response = client.get(INDEX + query)

    assert response.status_code == 200
    assert response.content == marshal(expected.index)
    sources = json.loads(response.content)["sources"]
    labels = json.loads(client.get("/aicr/data/labels.json" + query).content)
    assert labels["include"] == sorted(kinds)
    assert labels["sources"]
    assert set(labels["sources"]) <= set(sources)
    for sample_id, label in labels["sources"].items():
        assert set(label["kinds"]) <= kinds
        assert label["issuer"].startswith("+".join(label["kinds"]) + ":")
        assert label["realSource"] != sample_id  # a column of its own, not the signer's
        assert sources[sample_id]["allowlisted"] is False  # never weighed in consensus
    samples = [e for kind in sorted(kinds) for e in mixed[kind]]
    published = _everything_published(client, query)
    for sample in samples:
        assert f"/api/v1/evidence/{sample.pk}/bundle".encode() in published
    left_out = json.loads(client.get("/aicr/data/" + query).content)["leftOut"]
    assert left_out == {kind: 3 for kind in ("demo", "simulated") if kind not in kinds}


def test_the_data_folder_lists_what_is_there(client: Client, seeded: list[Evidence]) -> None:
    listing = json.loads(client.get("/aicr/data/?include=demo,simulated").content)
    index = json.loads(client.get(listing["index"]).content)
    assert listing["index"] == f"{INDEX}?include=demo,simulated"
    assert listing["leftOut"] == {}
    assert listing["runs"] == sum(
        e.withdrawn_at is None and e.verdict == "verified" for e in seeded
    )
    recipes = {tab["recipe"] for g in index["groups"] for d in g["dashboards"] for tab in d["tabs"]}
    assert recipes
    assert {entry["recipe"] for entry in listing["series"]} == recipes
    for entry in listing["series"]:
        got = client.get(entry["url"])
        assert got.status_code == 200, entry
        assert json.loads(got.content)["recipe"] == entry["recipe"]
    assert client.get(listing["labels"]).status_code == 200
    assert json.loads(client.get("/aicr/data/").content)["series"] == []  # all of it is demo
    assert client.get("/aicr/data").status_code == 301  # the slash is added, not a 404


@pytest.mark.parametrize("path", ["/aicr/data/", INDEX, "/aicr/data/labels.json"])
@pytest.mark.parametrize("include", ["real", "demo,", "demo,evil", "%3Cscript%3E", "x" * 500])
def test_a_bad_include_is_a_400_naming_it(
    client: Client, evidence_db: None, path: str, include: str
) -> None:
    response = client.get(f"{path}?include={include}")
    if include == "demo,":  # an empty item is no item: "demo" alone
        assert response.status_code == 200
        return
    assert response.status_code == 400
    assert "include: unknown value" in response.json()["detail"]
