"""The NDJSON export's PostgreSQL path (``exports.ndjson_pg``: each line's JSON built by the
database) against the Python path SQLite and the audit package take (``export_records``):
the same records, field for field, over rows that exercise every rule."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.http import QueryDict
from django.test import override_settings
from django.utils import timezone

from evidence_app.api.filters import EvidenceFilter
from evidence_app.consensus.outcomes import phase_summaries
from evidence_app.exports.ndjson_pg import ndjson_stream_pg
from evidence_app.exports.records import _phases, export_records
from evidence_app.models import Evidence, SignerClass, SignerKind, SigningKey
from recipes_app.models import Recipe
from tests.evidence_factories import EvidenceFactory, SignerFactory
from tests.factories import older_catalog_recipe

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the database-built NDJSON is PostgreSQL only"
)

ODD_PHASES: list[Any] = [
    {
        "zeta": {"passed": 3, "failed": 0, "skipped": 1, "ctrfDigest": "sha256:ab"},
        "Alpha": {"passed": "3", "failed": -1, "skipped": 2.0},
        "ünïcode": {"passed": True, "failed": None},
        "ascii~": {"passed": 2**70, "failed": 7},
        "not-an-object": 5,
        "list": [1, 2],
        'quote " back\\slash': {"skipped": 4},
    },
    {},
    [1, 2],
    "phases",
    None,
]


def url_of(route: str, pk: int) -> str:
    return f"https://example.test/{route}/{pk}/x"


def _pg(queryset: Any) -> list[dict[str, Any]]:
    body = b"".join(ndjson_stream_pg(queryset, url_of=url_of, lines_per_write=3))
    assert not body or body.endswith(b"\n")
    return [json.loads(line) for line in body.splitlines()]


def _python(queryset: Any) -> list[dict[str, Any]]:
    return [json.loads(json.dumps(r)) for r in export_records(queryset, url_of=url_of)]


@pytest.fixture
def varied(example_recipe: Recipe) -> list[Evidence]:
    now = timezone.now()
    key = SigningKey.objects.create(
        name="lab key", public_key_pem="-", fingerprint="f" * 64, algorithm="ecdsa-p256"
    )
    keyed = SignerFactory(kind=SignerKind.KEY, key=key, issuer="", identity="")
    delisted = SignerFactory(counted=False, signer_class=SignerClass.REPORTED)
    delisted.class_changes.create(
        from_class="community", to_class="reported", from_counted=True, to_counted=False, reason="t"
    )
    hostile = SignerFactory(label='=cmd|"/C calc"!A0\t\u2028', identity="ïd\\entity")
    made = [
        EvidenceFactory(recipe=example_recipe, predicate={"phases": phases})
        for phases in ODD_PHASES
    ]
    made.append(EvidenceFactory(recipe=example_recipe, predicate={"no": "phases"}))
    made += [
        EvidenceFactory(
            recipe=example_recipe,
            signer=keyed,
            artifact=b"bytes",
            rekor_log_index=123456789012,
            integrated_time=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),  # no microseconds
            attested_at=datetime(2026, 1, 2, 3, 4, 5, 60, tzinfo=UTC),
            trusted_root_name="production",
        ),
        EvidenceFactory(recipe=example_recipe, signer=delisted, aicr_version="v0.1.0"),
        EvidenceFactory(
            recipe=example_recipe,
            signer=hostile,
            attested_at=now - timedelta(days=90),
            withdrawn_at=now,
            withdrawal_reason="line\nbreak \x01 and \u2603",
            subject_digest="0" * 64,
            validator_catalog_version="0.0.1",
            is_demo=True,
        ),
        EvidenceFactory(recipe=example_recipe, is_simulated=True, verdict="invalid"),
        # Another catalog's check set; a v3 statement (and one naming the legacy digest); dev.
        EvidenceFactory(
            recipe=older_catalog_recipe(example_recipe, extra_checks=("performance/x",))
        ),
        EvidenceFactory(
            recipe=example_recipe,
            predicate_type="https://aicr.run/recipe-evidence/v3",
            subject_digest=example_recipe.digest_v3,
        ),
        EvidenceFactory(
            recipe=example_recipe, predicate_type="https://aicr.run/recipe-evidence/v3"
        ),
        EvidenceFactory(recipe=example_recipe, aicr_version="dev"),
        EvidenceFactory(recipe=example_recipe, aicr_version="v1.2.0"),
    ]
    return made


def test_it_writes_the_records_the_python_path_writes(varied: list[Evidence]) -> None:
    queryset = Evidence.objects.all()
    pg = _pg(queryset)

    assert pg == _python(queryset)
    assert [r["id"] for r in pg] == sorted(e.pk for e in varied)
    odd = pg[0]["phases"]
    assert list(odd) == sorted(odd)  # by code point, as Python sorts
    assert odd["Alpha"] == {"passed": 0, "failed": 0, "skipped": 0}
    assert odd["ascii~"] == {"passed": 2**70, "failed": 7, "skipped": 0}
    assert "not-an-object" not in odd
    codes = {code for r in pg for code in r["stale_reasons"]}
    assert {"recipe-changed", "older-than-30-days", "aicr-outdated", "withdrawn"} <= codes
    assert {"signer-not-allowlisted", "validator-catalog-outdated"} <= codes


@pytest.mark.parametrize("supported", ["", ">=1.0.0,<2.0.0", "==0.19.0"])
def test_it_counts_and_labels_the_supported_range_as_the_python_path(
    varied: list[Evidence], supported: str
) -> None:
    with override_settings(AICR_SUPPORTED_RANGE=supported):
        queryset = Evidence.objects.all()
        pg = _pg(queryset)
        assert pg == _python(queryset)
        counted = set(Evidence.objects.counted().values_list("pk", flat=True))
        assert {r["id"] for r in pg if r["counted"]} == counted
        unsupported = {r["id"] for r in pg if "aicr-unsupported" in r["stale_reasons"]}
        assert bool(unsupported) is bool(supported)


@pytest.mark.parametrize(
    "params",
    [
        "stale=true",
        "stale=false",
        "counted=true&aicr_version=v0.19.0",
        "class=reported",
        "signer=%25",  # a LIKE wildcard in a value stays a value
        "attested_before=2026-06-01T00:00:00Z",
    ],
)
def test_it_exports_the_same_selection_under_every_filter(
    varied: list[Evidence], params: str
) -> None:
    filterset = EvidenceFilter(QueryDict(params), queryset=Evidence.objects.all())
    assert filterset.is_valid(), filterset.errors
    assert _pg(filterset.qs) == _python(filterset.qs)


@pytest.mark.parametrize("phases", ODD_PHASES, ids=range(len(ODD_PHASES)))
def test_it_reads_phases_as_the_evidence_pages_do(phases: Any) -> None:
    summaries = phase_summaries({"phases": phases})
    expected = {
        name: {"passed": s.passed, "failed": s.failed, "skipped": s.skipped}
        for name, s in sorted(summaries.items())
    }
    assert _phases(phases) == expected
