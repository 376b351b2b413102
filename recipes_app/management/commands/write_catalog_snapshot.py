"""manage.py write_catalog_snapshot TREE OUT: make the catalog snapshot the site ships."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from recipes_app import resolver
from recipes_app.services import DEFAULT_AICR_VERSION
from recipes_app.snapshot import BUNDLED_SNAPSHOT, Snapshot, write_snapshot


class Command(BaseCommand):
    help = "Validate an AICR recipe tree and write it as a catalog snapshot (.json.gz)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tree", help="AICR recipe tree directory")
        parser.add_argument("out", nargs="?", default=str(BUNDLED_SNAPSHOT))
        parser.add_argument("--source", required=True, help="provenance label, e.g. repo@commit")
        parser.add_argument("--aicr-version", default=DEFAULT_AICR_VERSION)

    def handle(self, *args: object, **options: object) -> None:
        tree = Path(str(options["tree"]))
        try:
            files = resolver.read_tree(tree)
            resolver.load_catalog(files)  # refuse to ship a tree the importer would reject
        except resolver.CatalogError as exc:
            raise CommandError(f"snapshot not written: {exc}") from exc
        out = Path(str(options["out"]))
        write_snapshot(
            out,
            Snapshot(
                source=str(options["source"]),
                aicr_version=str(options["aicr_version"]),
                files=files,
            ),
        )
        self.stdout.write(self.style.SUCCESS(f"Wrote {len(files)} files to {out}"))
