"""The qualifications table: every counted evidence record across recipes, one row each, with
the hardware and software it ran on and what it measured (MLPerf-style results table).

It replaces the recipe page's stacked per-tuple ledger. The ledger grouped evidence by identity
tuple; here each counted evidence record is one row (a signed result a person can open, sort
and compare), and the tuple it ran on is its columns, so two rows on the same tuple sit
together when sorted by those columns. Reads only stored columns (``Evidence.identity``,
filled at ingest by ``coverage.stored``), so sorting, filtering and paging are SQL.

- ``qualification_queryset()``: the rows, annotated for sorting;
- ``qualification_listing(params, page_number, recipe="")``: one page for the HTML pages;
- ``QualificationFilter``: the filters and whitelisted ``sort`` shared by the page, the API
  and the exports;
- ``qualification_rows(evidence)``: display rows, with "not recorded" told from "redacted";
- ``qualification_record(row)``: one flat record for the CSV/NDJSON exports and the API.
"""

from __future__ import annotations

from .filters import SORTS, QualificationFilter
from .listing import QualificationListing, qualification_listing
from .table import (
    QualificationRow,
    qualification_queryset,
    qualification_record,
    qualification_rows,
)

__all__ = [
    "SORTS",
    "QualificationFilter",
    "QualificationListing",
    "QualificationRow",
    "qualification_listing",
    "qualification_queryset",
    "qualification_record",
    "qualification_rows",
]
