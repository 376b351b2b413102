"""manage.py import_catalog PATH: import an AICR recipe tree (directory) or a catalog snapshot.

Exit 2 when the tree or snapshot is refused (a file named with what is wrong: too deep, an
overlong number, not YAML or JSON, a broken reference); nothing is stored then.
"""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from recipes_app import resolver
from recipes_app.services import DEFAULT_AICR_VERSION, catalog_import
from recipes_app.snapshot import BUNDLED_SNAPSHOT, SnapshotError, read_snapshot


class Command(BaseCommand):
    help = (
        "Import an AICR recipe tree (a directory holding registry.yaml and overlays/) or a "
        "catalog snapshot (.json.gz). Without PATH, imports the snapshot bundled with the site. "
        "Idempotent: the same tree twice is one catalog version."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", nargs="?", help="recipe tree directory or snapshot file")
        parser.add_argument(
            "--aicr-version",
            default=None,
            help=(
                "version stamped into metadata.version, which every recipe digest covers "
                f"(default: the snapshot's own, or {DEFAULT_AICR_VERSION!r} for a tree: the "
                "version an aicr binary built from an untagged tree reports)"
            ),
        )

        parser.add_argument(
            "--source",
            default=None,
            help="where the tree came from, as shown with the catalog (default: PATH, or the "
            "snapshot's own); say what a generated tree is",
        )

    def handle(self, *args: object, **options: object) -> None:
        raw_path = options["path"]
        path = Path(str(raw_path)) if raw_path else BUNDLED_SNAPSHOT
        aicr_version = options["aicr_version"]
        try:
            if path.is_dir():
                files = resolver.read_tree(path)
                source = str(options["source"] or raw_path)
                version = str(aicr_version or DEFAULT_AICR_VERSION)
            elif path.is_file():
                snapshot = read_snapshot(path)
                files = snapshot.files
                source = str(options["source"] or snapshot.source or path.name)
                version = str(aicr_version or snapshot.aicr_version or DEFAULT_AICR_VERSION)
            else:
                raise CommandError(f"{path}: no such directory or snapshot file", returncode=2)
            result = catalog_import(files=files, source=source, aicr_version=version)
        except (resolver.CatalogError, SnapshotError) as exc:
            # Exit 2 like every command refusing its input (1 is left to Django's own errors).
            raise CommandError(f"catalog not imported: {exc}", returncode=2) from exc

        catalog = result.catalog
        if not result.created:
            self.stdout.write(f"Unchanged: {catalog} is already imported; nothing written.")
            return
        total = catalog.recipes.count()
        self.stdout.write(
            self.style.SUCCESS(
                f"Imported {catalog}: {total} recipes from {catalog.file_count} files "
                f"({len(result.new)} new, {len(result.changed)} with a changed digest, "
                f"{len(result.removed)} removed)."
            )
        )
        for name in result.changed:
            self.stdout.write(f"  digest changed: {name}")
        for name in result.removed:
            self.stdout.write(f"  removed: {name}")
