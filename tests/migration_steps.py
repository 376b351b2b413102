"""Run the project's migrations to a chosen point, for tests of a data migration."""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def migrate_to(target: list[tuple[str, str]] | None = None) -> Any:
    """Migrate to ``target`` (default: every app's latest migration, as the other tests
    expect the schema to be afterwards); the historical apps at that point."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    target = target or executor.loader.graph.leaf_nodes()
    executor.migrate(target)
    return executor.loader.project_state(target).apps
