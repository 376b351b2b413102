"""The evidence list's facet tallies (issue 22): ``FacetTally`` per (recipe name, signer,
verdict), ``RecipeFacetTally`` per (recipe name, verdict) and ``SignerFacetTally`` per (signer,
verdict), each with a ``verdict=""`` row for every verdict together. Database triggers on the
evidence table keep them (migration 0015, PostgreSQL and SQLite) in the statement that writes a
row, on every write path, as ``SignerTally``'s do. ``facets_recount`` is what the tables must
equal, counted from the evidence rows (tested); ``facets_rebuild`` replaces them with it (the
bench's bulk load pauses the triggers, then rebuilds).

A cost the triggers bring: every record of one recipe adds to that recipe's two
``RecipeFacetTally`` rows, so two uploads of one recipe at once take turns on those rows until
the first commits, as a counted upload's badge refresh already makes them take turns on the
recipe's advisory lock (``consensus.stored``).
"""

from __future__ import annotations

from typing import Any

from django.db import connection, transaction
from django.db.models import Count

from evidence_app.models import (
    ANY_VERDICT,
    Evidence,
    FacetTally,
    RecipeFacetTally,
    SignerFacetTally,
)

# Each table's key columns besides the verdict (model fields, and the evidence's columns).
KEYS: dict[type[Any], tuple[str, ...]] = {
    FacetTally: ("recipe_name", "signer_id"),
    RecipeFacetTally: ("recipe_name",),
    SignerFacetTally: ("signer_id",),
}


def recipe_records(name: str) -> int:
    """Every evidence record called ``name`` (withdrawn included): its every-verdict row."""
    row = RecipeFacetTally.objects.filter(recipe_name=name, verdict=ANY_VERDICT).first()
    return row.records if row else 0


def facets_recount() -> dict[str, dict[tuple[Any, ...], int]]:
    """Per table, ``{(key..., verdict): records}`` counted from the evidence rows."""
    out: dict[str, dict[tuple[Any, ...], int]] = {}
    for model, keys in KEYS.items():
        rows: dict[tuple[Any, ...], int] = {}
        grouped = Evidence.objects.order_by().values_list(*keys, "verdict").annotate(n=Count("pk"))
        for *key, verdict, n in grouped:
            rows[(*key, verdict)] = n
            every = (*key, ANY_VERDICT)
            rows[every] = rows.get(every, 0) + n
        out[model.__name__] = rows
    return out


def facets_stored() -> dict[str, dict[tuple[Any, ...], int]]:
    """The tables in ``facets_recount``'s shape (rows left at 0 records left out)."""
    return {
        model.__name__: {
            (*key, verdict): n
            for *key, verdict, n in model.objects.filter(records__gt=0).values_list(
                *keys, "verdict", "records"
            )
        }
        for model, keys in KEYS.items()
    }


@transaction.atomic
def facets_rebuild() -> int:
    """Replace the three tables by a recount (one INSERT … SELECT each); returns the rows."""
    qn = connection.ops.quote_name
    evidence = qn(Evidence._meta.db_table)
    total = 0
    for model, keys in KEYS.items():
        table = qn(model._meta.db_table)
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:  # nobody adds while the table is rebuilt
                cursor.execute(f"LOCK TABLE {table} IN EXCLUSIVE MODE")
        model.objects.all().delete()
        columns = ", ".join(qn(k) for k in keys)
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {table} ({columns}, verdict, records) "  # noqa: S608
                f"SELECT {columns}, verdict, COUNT(*) FROM {evidence} GROUP BY {columns}, verdict "
                f"UNION ALL SELECT {columns}, %s, COUNT(*) FROM {evidence} GROUP BY {columns}",
                [ANY_VERDICT],
            )
            total += int(cursor.rowcount)
    return total
