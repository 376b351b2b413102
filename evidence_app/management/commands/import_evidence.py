"""``manage.py import_evidence PATH [--allowlist=diff|apply|skip] [--by USERNAME]``: take in
the evidence AICR has published, from an AICR checkout, its ``recipes/`` folder or its
``recipes/evidence/`` folder.

Every pointer file becomes an ``EvidencePointer`` row (``services.pointers.pointer_import``):
refused with the reason when it breaks the pointer contract, otherwise pending until its bundle
is pulled by digest (only from registries this site's OCI policy lists) and verified. Importing
the same tree again changes nothing.

``--allowlist`` (default ``diff``) compares the tree's ``allowlist.yaml`` with the site's:
``diff`` prints what would change, ``apply`` publishes the merged allowlist as a new version
(entries only the site has are kept), ``skip`` leaves it alone.

Exit 2 when the tree as a whole is refused (no evidence folder, an invalid or hostile
``allowlist.yaml``, named); a pointer file that breaks the contract is one refused row, named
with its reason, and the rest of the tree is still imported.
"""

from __future__ import annotations

from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from evidence_app.services import allowlist_sync, pointers


class Command(BaseCommand):
    help = "Import AICR's committed evidence pointers (recipes/evidence/) and its allowlist."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", help="AICR checkout, its recipes/ or recipes/evidence/.")
        parser.add_argument(
            "--allowlist",
            choices=["diff", "apply", "skip"],
            default="diff",
            help="diff (default): print the allowlist changes; apply: publish them; skip.",
        )
        parser.add_argument("--by", help="The username recorded as publishing the allowlist.")

    def handle(self, *args: object, **options: object) -> None:
        by = None
        if options.get("by"):
            username = str(options["by"])
            by = get_user_model().objects.filter(username=username).first()
            if by is None:
                raise CommandError(f"--by: no user named {username!r}.")
        try:
            report = pointers.pointer_import(path=Path(str(options["path"])))
        except pointers.PointerImportError as exc:
            raise CommandError(str(exc), returncode=2) from None
        tree = report.tree
        self.stdout.write(
            f"{tree.evidence_dir}"
            + (f" at commit {tree.commit}" if tree.commit else " (commit unknown)")
        )
        for row in report.rows:
            reason = f": {row.reason}" if row.reason else ""
            self.stdout.write(f"{row.state:8} {row.path}{reason}")
        outcomes = ", ".join(f"{n} {k}" for k, n in sorted(report.outcomes.items())) or "none"
        states = ", ".join(f"{n} {k}" for k, n in sorted(report.states.items())) or "none"
        self.stdout.write(f"pointers: {outcomes}; now {states}")
        self._allowlist(report, str(options["allowlist"]), by)

    def _allowlist(self, report: pointers.ImportReport, mode: str, by: object) -> None:
        text = report.allowlist_text
        if mode == "skip":
            return
        if text is None:
            self.stdout.write("allowlist: the tree has no allowlist.yaml")
            return
        note = "import_evidence: the AICR tree's allowlist.yaml merged" + (
            f" (commit {report.tree.commit})" if report.tree.commit else ""
        )
        try:
            if mode == "apply":
                diff, row = allowlist_sync.allowlist_apply(tree_body=text, note=note, by=by)
            else:
                diff, row = allowlist_sync.allowlist_diff(tree_body=text), None
        except ValidationError as exc:
            raise CommandError(f"allowlist: {exc.messages[0]}", returncode=2) from None
        base = f"#{diff.current.pk}" if diff.current is not None else "none"
        self.stdout.write(f"allowlist (site's in force: {base}; + added, = kept, ~ moved):")
        for line in diff.lines():
            self.stdout.write(f"  {line}")
        if row is not None:
            self.stdout.write(f"allowlist: published version #{row.pk}")
        elif mode == "diff" and diff.changes_anything:
            self.stdout.write("allowlist: not applied (run again with --allowlist=apply)")
