"""The NDJSON export on PostgreSQL: the database builds most of each line.

``records.export_records`` reads columns and shapes every record in Python (the path SQLite
takes, and the audit package's); at 100,000 rows that was 0.14x the rate PostgreSQL sends the
same rows with ``COPY`` (docs/benchmarks.md). Here one ``COPY (SELECT …) TO STDOUT`` returns per
row the record's JSON in three objects (the keys before ``phases``, between ``phases`` and
``stale``, after ``stale_reasons``: ``json_build_object``, keys sorted), the stored
``predicate.phases`` and the facts its stale reasons depend on. Python adds ``phases``
(``records._phases``) and the stale pair (``records.StaleCodes``, the one rule, run once per
distinct combination) between them, while the database makes the next rows. The records equal
``export_records``'s field by field (a test holds them so); only spaces inside a line differ."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import orjson
from django.db import connection
from django.db.models import QuerySet

from evidence_app.exports.records import StaleCodes, _phases, url_around_id
from evidence_app.models import Evidence, Verdict
from evidence_app.services.versions import INVALID_KEY, supported_range
from recipes_app.models import Catalog, Recipe

# ``_iso`` of records.py in SQL: ISO 8601 in UTC with "Z", microseconds only when not zero
# (as Python's ``isoformat``).
_ISO = (
    "regexp_replace(to_char({} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US'), "
    "'\\.000000$', '') || 'Z'"
)

_COUNTED = (
    "(e.verdict = %(verified)s AND e.withdrawn_at IS NULL AND s.counted AND NOT e.is_simulated"
    " AND {in_range})"
)
_SQL_OPERATORS = {">=": ">=", ">": ">", "<=": "<=", "<": "<", "==": "="}


def _in_range_sql(params: dict[str, Any]) -> str:
    """``models.supported_range_q`` on ``e.aicr_version_key`` as SQL text, its keys bound in
    ``params`` (a test holds the export's ``counted`` equal to ``counted()`` under a range)."""
    supported = supported_range()
    if not supported.enabled:
        return "TRUE"
    params["no_release"] = ["", INVALID_KEY]
    parts = ["NOT (e.aicr_version_key = ANY(%(no_release)s))"]
    for i, bound in enumerate(supported.bounds):
        params[f"range_{i}"] = bound.key
        parts.append(f"e.aicr_version_key {_SQL_OPERATORS[bound.op]} %(range_{i})s")
    return "(" + " AND ".join(parts) + ")"


# Record key → SQL, every ``ExportRecord`` key but ``stale`` and ``stale_reasons``.
_FIELDS = {
    "id": "e.id",
    "sha256": "e.sha256",
    "recipe": "e.recipe_name",
    "recipe_digest": "e.subject_digest",
    "catalog": "r.catalog_id",
    "predicate_type": "e.predicate_type",
    "container": "e.container",
    "media_type": "e.media_type",
    "size": "e.size",
    "has_artifact": "e.artifact IS NOT NULL",
    "signer_slug": "s.slug",
    "signer_label": "s.label",
    "signer_kind": "s.kind",
    "signer_identity": "s.identity",
    "signer_issuer": "s.issuer",
    "signer_key_fingerprint": "coalesce(k.fingerprint, '')",
    "signer_class": "s.signer_class",
    "signer_counted": "s.counted",
    "counted": _COUNTED,
    "verdict": "e.verdict",
    "withdrawn": "e.withdrawn_at IS NOT NULL",
    "withdrawn_at": _ISO.format("e.withdrawn_at"),
    "withdrawal_reason": "e.withdrawal_reason",
    "aicr_version": "e.aicr_version",
    "validator_catalog_version": "e.validator_catalog_version",
    "k8s_version": "e.k8s_version",
    "attested_at": _ISO.format("e.attested_at"),
    "uploaded_at": _ISO.format("e.uploaded_at"),
    "rekor_log_index": "e.rekor_log_index",
    "rekor_integrated_time": _ISO.format("e.integrated_time"),
    "trusted_root": "e.trusted_root_name",
    "is_simulated": "e.is_simulated",
    "is_demo": "e.is_demo",
    "url": "%(url_head)s || e.id || %(url_tail)s",
    "bundle_url": "%(bundle_head)s || e.id || %(bundle_tail)s",
}


def _json_object(keys: list[str]) -> str:
    pairs = ", ".join(f"'{key}', {_FIELDS[key]}" for key in keys)
    return f"json_build_object({pairs})::text"


# Python adds ``phases`` and the stale pair between JSON objects the database builds over the
# keys before, between and after them (sorted, as ``ndjson_line`` writes them).
_KEYS = sorted(_FIELDS)
_BEFORE_PHASES = [key for key in _KEYS if key < "phases"]
_BEFORE_STALE = [key for key in _KEYS if "phases" < key < "stale"]
_AFTER_STALE = [key for key in _KEYS if key > "stale_reasons"]


_STALE_KEY = """json_build_array(
         e.recipe_name, e.subject_digest, e.predicate_type, r.catalog_id, e.aicr_version,
         NOT s.counted AND EXISTS (
           SELECT 1 FROM evidence_app_signerclasschange c
           WHERE c.signer_id = s.id AND c.from_counted
         ),
         e.attested_at < %(old_before)s,
         e.withdrawn_at IS NOT NULL
       )::text"""

_SQL = f"""
COPY (
  SELECT {_json_object(_BEFORE_PHASES)}, e.predicate -> 'phases', {_json_object(_BEFORE_STALE)},
         {_STALE_KEY}, {_json_object(_AFTER_STALE)}
  FROM evidence_app_evidence e
  JOIN evidence_app_signer s ON s.id = e.signer_id
  LEFT JOIN evidence_app_signingkey k ON k.id = s.key_id
  JOIN recipes_app_recipe r ON r.id = e.recipe_id
  WHERE e.id IN ({{selected}})
  ORDER BY e.id
) TO STDOUT
"""  # noqa: S608 - constants; the selection is the ORM's own SQL, its values bound


def _named(sql: str, positional: tuple[Any, ...], params: dict[str, Any]) -> str:
    """``sql`` with its ``%s`` placeholders named (``%%`` left alone), their values put in
    ``params``: the selection's SQL is positional, ours named."""
    values = iter(positional)

    def name(match: re.Match[str]) -> str:
        if match.group() == "%%":
            return "%%"
        key = f"selected_{len(params)}"
        params[key] = next(values)
        return f"%({key})s"

    return re.sub("%[%s]", name, sql)


def _stale_fragment(codes: list[str]) -> str:
    """``"stale":…,"stale_reasons":[…]``, the members ``ExportRecord`` has there."""
    return json.dumps({"stale": bool(codes), "stale_reasons": codes}, separators=(",", ":"))[1:-1]


def _phases_json(phases: str | None) -> str:
    """``records._phases`` of the stored ``predicate.phases`` (JSON text, None when absent),
    as JSON: the rule stays in Python, where it runs beside the database making the next rows.
    Read with the standard library (orjson reads integers beyond 64 bits as floats), written
    with orjson unless it refuses (those integers)."""
    counts = _phases(json.loads(phases)) if phases is not None else {}
    try:
        return orjson.dumps(counts).decode()
    except orjson.JSONEncodeError:
        return json.dumps(counts, separators=(",", ":"), ensure_ascii=False)


def ndjson_stream_pg(
    queryset: QuerySet[Evidence],
    *,
    url_of: Callable[[str, int], str],
    lines_per_write: int = 500,
) -> Iterator[bytes]:
    """``queryset``'s records as NDJSON, oldest id first, ``lines_per_write`` lines per write.

    ``COPY … TO STDOUT`` streams the rows as PostgreSQL makes them (a server-side cursor in
    autocommit would materialise every row before the first): the database builds lines while
    Python writes the previous ones, and the connection is busy until the last row. So every
    fact the stale rule needs is read first, for every recipe name there is (a catalog
    imported during the export is not seen: the export is of the moment it started)."""
    stale = StaleCodes()
    stale.load_recipes(Recipe.objects.order_by().values_list("name", flat=True).distinct())
    stale.load_catalogs(Catalog.objects.values_list("pk", flat=True))
    selected, selected_params = queryset.order_by().values("pk").query.sql_with_params()
    url_head, url_tail = url_around_id(lambda pk: url_of("api:evidence-detail", pk))
    bundle_head, bundle_tail = url_around_id(lambda pk: url_of("api:evidence-bundle", pk))
    params: dict[str, Any] = {
        "verified": Verdict.VERIFIED.value,
        "old_before": stale.old_before,
        "url_head": url_head,
        "url_tail": url_tail,
        "bundle_head": bundle_head,
        "bundle_tail": bundle_tail,
    }
    sql = _SQL.replace("{selected}", _named(selected, selected_params, params)).replace(
        "{in_range}", _in_range_sql(params)
    )
    fragments: dict[str, str] = {}  # stale key (JSON array text) → its stale fragment
    connection.ensure_connection()
    with connection.connection.cursor() as cursor, cursor.copy(sql, params) as copy:
        copy.set_types(["text"] * 5)
        lines: list[str] = []
        for before_phases, phases, before_stale, key, after_stale in copy.rows():
            fragment = fragments.get(key)
            if fragment is None:
                if len(fragments) == StaleCodes.MEMO_LIMIT:  # memory stays flat whatever the data
                    fragments.clear()
                fragment = fragments[key] = _stale_fragment(stale.codes(tuple(json.loads(key))))
            lines.append(
                f'{before_phases[:-1]}, "phases": {_phases_json(phases)}, {before_stale[1:-1]}, '
                f"{fragment}, {after_stale[1:]}\n"
            )
            if len(lines) == lines_per_write:
                yield "".join(lines).encode()
                lines = []
        if lines:
            yield "".join(lines).encode()
