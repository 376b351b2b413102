"""One pre-compiled INSERT per model for the rows every stored upload writes."""

from __future__ import annotations

import functools
from typing import Any

from django.db import connection
from django.db.models import Field, Model


def column_of(field: Field[Any, Any]) -> str:
    """A concrete field's column (the stubs allow None, which only non-concrete fields have)."""
    assert field.column is not None
    return field.column


def _table_and_pk(model: type[Model]) -> tuple[str, str]:
    assert model._meta.pk is not None
    return model._meta.db_table, column_of(model._meta.pk)


@functools.cache
def _insert_sql_for(model: type[Model], vendor: str) -> tuple[str, tuple[Field[Any, Any], ...]]:
    """The INSERT of every column but the primary key, and the fields in its order."""
    qn = connection.ops.quote_name
    table, pk_column = _table_and_pk(model)
    fields = tuple(f for f in model._meta.concrete_fields if not f.primary_key)
    placeholders = ", ".join(["%s"] * len(fields))
    sql = (
        f"INSERT INTO {qn(table)} "  # noqa: S608 - identifiers from the model
        f"({', '.join(qn(column_of(f)) for f in fields)}) VALUES ({placeholders})"
    )
    if connection.features.can_return_columns_from_insert:
        sql += f" RETURNING {qn(pk_column)}"
    return sql, fields


def insert_row(obj: Model) -> None:
    """``obj.save(force_insert=True)`` for the two rows every stored upload writes (``Evidence``,
    ``UploadLog``), without compiling the INSERT each time: the ORM spent more CPU building
    and compiling these two statements than the verification spent checking the signature
    (docs/benchmarks.md). The values go through each field's own ``pre_save`` and
    ``get_db_prep_save``, exactly as ``save`` prepares them; no signal listens to these models.
    """
    model = type(obj)
    sql, fields = _insert_sql_for(model, connection.vendor)
    values = [f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, values)
        if connection.features.can_return_columns_from_insert:
            pk = cursor.fetchone()[0]
        else:
            pk = connection.ops.last_insert_id(cursor, *_table_and_pk(model))
    obj.pk = pk
    obj._state.adding = False
    obj._state.db = connection.alias
