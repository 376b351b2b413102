"""manage.py write_v1_tree SRC DEST: a v1-format copy of a v0.19 tree (``recipes_app.v1_tree``)."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from recipes_app import resolver
from recipes_app.v1_tree import SOURCE_NOTE, to_v1_tree


class Command(BaseCommand):
    help = (
        "Write a v1-format (aicr.run/v1beta1, v1beta2) copy of an AICR v0.19 recipe tree by "
        "ADR-022's apiVersion map. Only the apiVersion lines change: it is the v0.19 catalog in "
        "v1 form, for tests and demos, not AICR 1.x's catalog."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("source", help="an AICR recipe tree (holds registry.yaml, overlays/)")
        parser.add_argument("dest", help="a directory to write the copy into (must not exist)")

    def handle(self, *args: object, **options: object) -> None:
        source = Path(str(options["source"]))
        dest = Path(str(options["dest"]))
        if dest.exists():
            raise CommandError(f"{dest}: already exists; choose a new directory")
        try:
            files = to_v1_tree(resolver.read_tree(source))
            resolver.load_catalog(files)  # refuse to write a tree that would not import
        except resolver.CatalogError as exc:
            raise CommandError(f"tree not written: {exc}") from exc
        for path, text in files.items():
            target = dest / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        (dest / "GENERATED.md").write_text(
            f"# Generated\n\n{SOURCE_NOTE}: written by `manage.py write_v1_tree` from "
            f"`{source.name}`. Import it with a source label that says so.\n",
            encoding="utf-8",
        )
        self.stdout.write(
            self.style.SUCCESS(f"Wrote {len(files)} files to {dest} ({SOURCE_NOTE}).")
        )
