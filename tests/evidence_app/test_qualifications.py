"""The qualifications table (``evidence_app.qualifications``): the page, the recipe page's
section, ``GET /api/v1/qualifications/`` and its CSV/NDJSON exports, with evidence ingested
through the real verify-before-count path (``coverage_data.publish``: signed summary bundles
carrying a snapshot) and factory rows where only the columns matter."""

from __future__ import annotations

import csv
import importlib
import io
import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.apps import apps
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from evidence_app.models import Evidence, SignerClass
from evidence_app.qualifications import listing, table
from evidence_app.qualifications.listing import RECIPE_PAGE_SIZE
from recipes_app.models import Recipe
from tests.evidence_app.coverage_data import full_snapshot, publish
from tests.evidence_factories import EvidenceFactory, SignerFactory, example_statement

pytestmark = pytest.mark.usefixtures("evidence_db")
PAGE = "/qualifications/"
API = "/api/v1/qualifications/"
CSV_URL = "/api/v1/export/qualifications.csv"
NDJSON_URL = "/api/v1/export/qualifications.ndjson"
NOW = datetime.now(UTC).replace(microsecond=0)


def row_ids(html: str) -> list[int]:
    return [int(pk) for pk in re.findall(r'<tr class="qual-row[^"]*" data-evidence="(\d+)"', html)]


def cell(html: str, pk: int, column: str) -> str:
    row = re.search(rf'data-evidence="{pk}">(.*?)</tr>', html, re.S)
    assert row is not None, pk
    found = re.search(rf'<td[^>]*data-col="{column}">(.*?)</td>', row.group(1), re.S)
    assert found is not None, (pk, column)
    return found.group(1)


@pytest.fixture
def three(example_recipe: Recipe) -> list[Evidence]:
    """Three signed records: two drivers, one redacted bundle (AICR's minimal policy)."""
    return [
        publish(example_recipe, full_snapshot(), lab="lab-a", attested_at=NOW - timedelta(days=2)),
        publish(
            example_recipe,
            full_snapshot(driver="570.86.15", gpu_count=4),
            lab="lab-b",
            attested_at=NOW - timedelta(days=1),
        ),
        publish(example_recipe, full_snapshot(), lab="lab-c", attested_at=NOW, redact=True),
    ]


# --- what ingest stores ------------------------------------------------------------------------


def test_it_stores_the_identity_tuple_at_ingest(three: list[Evidence]) -> None:
    full, four_gpus, redacted = (Evidence.objects.get(pk=e.pk) for e in three)
    assert full.identity["driver"] == "580.95.05"
    assert full.identity["gpu_operator"] == "v25.10.1"
    assert full.gpu_count == 8
    assert four_gpus.gpu_count == 4
    assert full.gpu_model
    assert full.gpu_model == full.identity["gpu_model"]
    # AICR's redaction removes the driver (K8s.policy) from the snapshot: not stored, not guessed.
    assert redacted.identity["driver"] is None
    assert redacted.identity["k8s_version"] == "1.33.5"


def test_the_migration_fills_rows_stored_before_it(three: list[Evidence]) -> None:
    Evidence.objects.update(identity={}, gpu_model="", gpu_count=None)
    migration = importlib.import_module("evidence_app.migrations.0010_evidence_identity_columns")
    migration.fill_identity_columns(apps, None)
    full = Evidence.objects.get(pk=three[0].pk)
    assert full.identity["driver"] == "580.95.05"
    assert full.gpu_count == 8


# --- the page -------------------------------------------------------------------------------------


def test_the_page_shows_one_row_per_counted_record_with_its_identities(
    three: list[Evidence],
) -> None:
    response = Client().get(PAGE)
    assert response.status_code == 200
    html = response.content.decode()
    full, four_gpus, redacted = three
    assert row_ids(html) == [redacted.pk, four_gpus.pk, full.pk]  # newest first
    assert "580.95.05" in cell(html, full.pk, "driver")
    assert "v25.10.1" in cell(html, full.pk, "driver")
    assert "\u00d7 4" in cell(html, four_gpus.pk, "gpu")
    assert "1.33.5" in cell(html, full.pk, "k8s")
    assert 'href="/qualifications/?sort=driver"' in html


def test_a_redacted_value_is_told_from_one_not_recorded(
    three: list[Evidence], example_recipe: Recipe
) -> None:
    # A Sigstore bundle without a snapshot and without a redaction block: its fingerprint is all
    # it records, and nothing says a value was removed.
    predicate = {k: v for k, v in example_statement()["predicate"].items() if k != "redaction"}
    bare = EvidenceFactory(
        recipe=example_recipe, attested_at=NOW - timedelta(days=3), predicate=predicate
    )
    html = Client().get(PAGE).content.decode()
    redacted = three[2]
    assert 'title="redacted"' in cell(html, redacted.pk, "driver")
    assert 'title="redacted"' in cell(html, redacted.pk, "instance")
    assert 'title="not recorded"' in cell(html, bare.pk, "driver")
    # The snapshot policy keeps the Kubernetes version: a redacted bundle still shows it.
    assert "1.33.5" in cell(html, redacted.pk, "k8s")
    items = {i["id"]: i for i in Client().get(API).json()["results"]}
    assert set(items[redacted.pk]["redacted"]) == {"driver", "gpu_operator", "instance_type"}
    assert items[redacted.pk]["driver"] is None
    assert "driver" in items[bare.pk]["not_recorded"]
    assert items[bare.pk]["redacted"] == []


def test_it_sorts_by_a_whitelisted_column_either_way(three: list[Evidence]) -> None:
    full, four_gpus, redacted = three
    ascending = row_ids(Client().get(PAGE, {"sort": "driver"}).content.decode())
    descending = row_ids(Client().get(PAGE, {"sort": "-driver"}).content.decode())
    # 570 < 580; the redacted row (no driver) last both ways.
    assert ascending == [four_gpus.pk, full.pk, redacted.pk]
    assert descending == [full.pk, four_gpus.pk, redacted.pk]
    by_gpus = [i["id"] for i in Client().get(API, {"sort": "gpus"}).json()["results"]]
    assert by_gpus[0] == four_gpus.pk


def test_an_unknown_sort_or_filter_value_is_a_400_naming_it(three: list[Evidence]) -> None:
    page = Client().get(PAGE, {"sort": "content"})
    assert page.status_code == 400
    assert "sort:" in page.content.decode()
    api = Client().get(API, {"state": "GREAT"})
    assert api.status_code == 400
    assert "GREAT" in json.dumps(api.json())
    assert Client().get(CSV_URL, {"sort": "sha256"}).status_code == 400


def test_it_filters_by_recipe_gpu_service_signer_class_and_state(
    three: list[Evidence], example_recipe: Recipe
) -> None:
    other = Recipe.objects.filter(catalog=example_recipe.catalog).exclude(
        service=example_recipe.service
    )[0]
    elsewhere = EvidenceFactory(
        recipe=other, signer=SignerFactory(signer_class=SignerClass.PARTNER)
    )
    everything = row_ids(Client().get(PAGE).content.decode())
    assert elsewhere.pk in everything
    assert len(everything) == 4
    assert row_ids(Client().get(PAGE, {"recipe": other.name}).content.decode()) == [elsewhere.pk]
    by_service = row_ids(Client().get(PAGE, {"service": example_recipe.service}).content.decode())
    assert sorted(by_service) == sorted(e.pk for e in three)
    by_class = row_ids(Client().get(PAGE, {"signer_class": "partner"}).content.decode())
    assert by_class == [elsewhere.pk]
    gpu = three[0].gpu_model
    assert sorted(row_ids(Client().get(PAGE, {"gpu": gpu}).content.decode())) == sorted(
        e.pk for e in three
    )
    states = {
        r.pk: r.consensus.state for r in Recipe.objects.filter(pk__in=[example_recipe.pk, other.pk])
    }
    for state in set(states.values()):
        by_state = [i["id"] for i in Client().get(API, {"state": state}).json()["results"]]
        expected = [e.pk for e in [*three, elsewhere] if states[e.recipe_id] == state]
        assert sorted(by_state) == sorted(expected)
    unused = next(s for s in ("FAILING", "CONTESTED", "UNTESTED") if s not in states.values())
    assert Client().get(API, {"state": unused}).json()["results"] == []


def test_simulated_runs_only_when_asked_and_labelled(three: list[Evidence]) -> None:
    Evidence.objects.filter(pk=three[0].pk).update(is_simulated=True)
    assert three[0].pk not in row_ids(Client().get(PAGE).content.decode())
    html = Client().get(PAGE, {"simulated": "true"}).content.decode()
    assert three[0].pk in row_ids(html)
    assert "SIMULATED" in re.search(rf'data-evidence="{three[0].pk}">(.*?)</tr>', html, re.S)[1]


def test_demo_rows_are_labelled(example_recipe: Recipe) -> None:
    demo = EvidenceFactory(recipe=example_recipe, is_demo=True)
    html = Client().get(PAGE).content.decode()
    assert "DEMO" in cell(html, demo.pk, "state")


def test_the_recipe_page_shows_the_table_for_that_recipe_only(
    three: list[Evidence], example_recipe: Recipe
) -> None:
    other = Recipe.objects.filter(catalog=example_recipe.catalog).exclude(pk=example_recipe.pk)[0]
    elsewhere = EvidenceFactory(recipe=other)
    html = Client().get(f"/recipes/{example_recipe.name}/").content.decode()
    assert 'id="qualifications"' in html
    assert sorted(row_ids(html)) == sorted(e.pk for e in three)
    assert elsewhere.pk not in row_ids(html)
    assert f'href="/qualifications/?recipe={example_recipe.name}' in html


def _shown_count(html: str) -> int:
    found = re.search(r'<p class="results__count">.*?<strong>(\d+)</strong>', html, re.S)
    assert found is not None
    return int(found.group(1))


@pytest.mark.parametrize("supported", ["", ">=0.20.0"])
def test_the_unfiltered_count_is_the_tallied_counted_records_and_equals_a_count(
    example_recipe: Recipe, supported: str, settings: object
) -> None:
    settings.AICR_SUPPORTED_RANGE = supported  # type: ignore[attr-defined]
    lab, reported = SignerFactory(label="org/lab"), SignerFactory(counted=False, label="x/y")
    EvidenceFactory.create_batch(3, recipe=example_recipe, signer=lab, aicr_version="v0.20.1")
    EvidenceFactory(recipe=example_recipe, signer=lab, aicr_version="v0.19.0")  # out of range
    EvidenceFactory(recipe=example_recipe, signer=lab, is_simulated=True)
    EvidenceFactory(recipe=example_recipe, signer=reported)
    withdrawn = EvidenceFactory(recipe=example_recipe, signer=lab, aicr_version="v0.20.1")
    Evidence.objects.filter(pk=withdrawn.pk).update(withdrawn_at=NOW, withdrawal_reason="bad")
    html = Client().get(PAGE).content.decode()
    counted = Evidence.objects.counted().count()
    assert counted == (3 if supported else 4)
    assert _shown_count(html) == counted == len(row_ids(html))
    # A filter counts its own rows (no tally for it).
    assert _shown_count(Client().get(PAGE, {"simulated": "true"}).content.decode()) == counted + 1


def test_the_filter_choices_are_the_values_the_rows_hold(example_recipe: Recipe) -> None:
    same_catalog = Recipe.objects.filter(catalog=example_recipe.catalog)
    others = list(same_catalog.exclude(pk=example_recipe.pk))
    lab, reported = SignerFactory(label="org/lab"), SignerFactory(counted=False, label="x/y")
    EvidenceFactory(recipe=example_recipe, signer=lab, gpu_model="H100")
    EvidenceFactory(recipe=example_recipe, signer=lab, gpu_model="")  # no GPU: no choice
    EvidenceFactory(recipe=example_recipe, signer=reported, gpu_model="A100")  # never counts
    EvidenceFactory(recipe=others[0], signer=reported, gpu_model="L40S", is_simulated=True)
    EvidenceFactory(recipe=others[1], signer=lab, gpu_model="B200", verdict="invalid")
    gone = EvidenceFactory(recipe=others[2], signer=lab, gpu_model="GB200")
    Evidence.objects.filter(pk=gone.pk).update(withdrawn_at=NOW, withdrawal_reason="bad")
    EvidenceFactory(recipe=others[3], signer=reported, gpu_model="H200")
    EvidenceFactory(recipe=others[3], signer=lab, gpu_model="H200")  # after an uncounted row
    choices = listing._choices()
    rows = table.qualification_queryset().values_list("recipe_name", "gpu_model", "recipe__service")
    assert choices["recipe"] == sorted({r for r, _g, _s in rows})
    assert choices["gpu"] == sorted({g for _r, g, _s in rows if g}) == ["H100", "H200", "L40S"]
    assert choices["service"] == sorted({s for _r, _g, s in rows if s})
    assert set(choices["recipe"]) == {example_recipe.name, others[0].name, others[3].name}


# --- constant queries ------------------------------------------------------------------------


def _queries(url: str, params: dict[str, str]) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = Client().get(url, params)
    assert response.status_code == 200, response.content[:300]
    return len(queries)


@pytest.mark.parametrize("url", [PAGE, API])
def test_the_query_count_does_not_grow_with_the_rows(
    example_recipe: Recipe, url: str, django_assert_num_queries
) -> None:
    EvidenceFactory.create_batch(3, recipe=example_recipe)
    _queries(url, {})  # warm the per-process caches (validator catalog, supported range)
    few = _queries(url, {"sort": "driver"})
    EvidenceFactory.create_batch(40, recipe=example_recipe)
    with django_assert_num_queries(few):
        assert Client().get(url, {"sort": "driver"}).status_code == 200


# --- exports -------------------------------------------------------------------------------------


def test_the_csv_export_streams_the_filtered_sorted_rows(three: list[Evidence]) -> None:
    response = Client().get(CSV_URL, {"sort": "driver"})
    assert response.status_code == 200
    assert response.streaming
    assert response["Content-Disposition"].startswith('attachment; filename="qualifications-')
    text = b"".join(response.streaming_content).decode("utf-8-sig")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [int(r["id"]) for r in rows] == [three[1].pk, three[0].pk, three[2].pk]
    assert rows[0]["driver"] == "570.86.15"
    assert rows[2]["driver"] == ""
    assert rows[2]["redacted"] == "instance_type driver gpu_operator"  # in column order


def test_the_ndjson_export_is_the_list_items(three: list[Evidence]) -> None:
    response = Client().get(NDJSON_URL, {"gpu": three[0].gpu_model})
    assert response.status_code == 200
    lines = [json.loads(line) for line in b"".join(response.streaming_content).splitlines()]
    listed = Client().get(API, {"gpu": three[0].gpu_model}).json()["results"]
    assert lines == listed
    assert len(lines) == 3


def test_measured_numbers_show_with_their_units_or_why_there_are_none(
    example_recipe: Recipe,
) -> None:
    metric = {"label": "busbw", "value": 412.5, "unit": "GB/s"}
    result = {
        "status": "passed",
        "raw_status": "passed",
        "duration_ms": 1.0,
        "message": None,
        "metrics": [metric],
        "thresholds": [],
    }
    measured = EvidenceFactory(
        recipe=example_recipe, check_results={"performance": {"nccl-all-reduce-bw": result}}
    )
    redacted = EvidenceFactory(recipe=example_recipe)  # the example bundle's CTRF omits stdout
    html = Client().get(PAGE).content.decode()
    assert re.search(r"busbw <strong>412\.5</strong> GB/s", cell(html, measured.pk, "measured"))
    assert 'title="redacted"' in cell(html, redacted.pk, "measured")
    items = {i["id"]: i for i in Client().get(API).json()["results"]}
    assert items[measured.pk]["measures"] == ["nccl-all-reduce-bw busbw=412.5 GB/s"]


def test_the_recipe_page_shows_the_newest_three_and_links_to_all(example_recipe: Recipe) -> None:
    made = EvidenceFactory.create_batch(7, recipe=example_recipe)
    html = Client().get(f"/recipes/{example_recipe.name}/").content.decode()
    assert len(row_ids(html)) == RECIPE_PAGE_SIZE == 3
    assert f"All 7 qualifications of {example_recipe.name}" in html
    assert 'rel="next"' not in html.split('id="qualifications"')[1].split("</section>")[0]
    everything = row_ids(Client().get(PAGE, {"recipe": example_recipe.name}).content.decode())
    assert sorted(everything) == sorted(e.pk for e in made)


def test_a_percent_sign_in_a_bad_value_is_a_400_not_a_500() -> None:
    # Found by schemathesis: DRF formats a field error's message with "%" (it was a TypeError).
    response = Client().get(API, {"simulated": "8%s%"})
    assert response.status_code == 400
    assert "8%s%" in json.dumps(response.json())
