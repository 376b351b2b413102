"""The evidence list's facet tallies (issue 22): ``FacetTally`` per (recipe name, signer,
verdict), ``RecipeFacetTally`` per (recipe name, verdict) and ``SignerFacetTally`` per (signer,
verdict), each with a ``verdict=""`` row for every verdict together. Database triggers on the
evidence table keep them (migration 0015, PostgreSQL and SQLite) in the statement that writes a
row, on every write path, as ``SignerTally``'s do. ``facets_recount`` is what the tables must
equal, counted from the evidence rows (tested); ``facets_rebuild`` replaces them with it (the
bench's bulk load pauses the triggers, then rebuilds).

What the triggers cost the writes: a record adds to six tally rows in its insert. Four are its
signer's (two uploads by one signer at once already take turns on its ``SignerTally`` row);
the recipe's two are one of ``RECIPE_FACET_STRIPES`` stripes, by signer id, so two uploads of
one recipe by two signers add to different rows and neither waits at its insert for the other
to commit (one row per recipe did: ``test_two_uploads_at_once_both_reach_the_stored_badge``).
"""

from __future__ import annotations

from typing import Any

from django.db import connection, transaction
from django.db.models import Count, F, Sum

from evidence_app.models import (
    ANY_VERDICT,
    RECIPE_FACET_STRIPES,
    Evidence,
    FacetTally,
    RecipeFacetTally,
    SignerFacetTally,
)

# Each table's key columns besides the verdict, each with what it holds of an evidence row.
KEYS: dict[type[Any], tuple[tuple[str, Any], ...]] = {
    FacetTally: (("recipe_name", F("recipe_name")), ("signer_id", F("signer_id"))),
    RecipeFacetTally: (
        ("recipe_name", F("recipe_name")),
        ("stripe", F("signer_id") % RECIPE_FACET_STRIPES),
    ),
    SignerFacetTally: (("signer_id", F("signer_id")),),
}


def recipe_records(name: str) -> int:
    """Every evidence record called ``name`` (withdrawn included): its every-verdict rows."""
    rows = RecipeFacetTally.objects.filter(recipe_name=name, verdict=ANY_VERDICT)
    return int(rows.aggregate(n=Sum("records", default=0))["n"])


def facets_recount() -> dict[str, dict[tuple[Any, ...], int]]:
    """Per table, ``{(key..., verdict): records}`` counted from the evidence rows."""
    out: dict[str, dict[tuple[Any, ...], int]] = {}
    for model, keys in KEYS.items():
        rows: dict[tuple[Any, ...], int] = {}
        names = [f"_{column}" for column, _ in keys]
        grouped = (
            Evidence.objects.order_by()
            .annotate(**{f"_{column}": source for column, source in keys})
            .values_list(*names, "verdict")
            .annotate(n=Count("pk"))
        )
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
                *(column for column, _ in keys), "verdict", "records"
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
        columns = ", ".join(qn(column) for column, _ in keys)
        sources = ", ".join(
            qn(column) if column != "stripe" else f"({qn('signer_id')} %% {RECIPE_FACET_STRIPES})"
            for column, _ in keys
        )
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {table} ({columns}, verdict, records) "  # noqa: S608
                f"SELECT {sources}, verdict, COUNT(*) FROM {evidence} GROUP BY {sources}, verdict "
                f"UNION ALL SELECT {sources}, %s, COUNT(*) FROM {evidence} GROUP BY {sources}",
                [ANY_VERDICT],
            )
            total += int(cursor.rowcount)
    return total
