"""``manage.py export_pointer EVIDENCE_ID``: the pointer file AICR's repository expects for a
record, for a contributor's pull request. Prints the path it goes to (stderr) and the file
(stdout); ``CommandError`` says why no pointer can be written (no OCI reference, a key-signed
record, withdrawn, ...)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from evidence_app.models import Evidence
from evidence_app.services import pointers


class Command(BaseCommand):
    help = "Write the AICR pointer file (recipes/evidence/<recipe>/<src>/sha256-<d>.yaml)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("evidence_id", type=int)

    def handle(self, *args: object, **options: object) -> None:
        evidence = (
            Evidence.objects.for_listing().filter(pk=int(str(options["evidence_id"]))).first()
        )
        if evidence is None:
            raise CommandError(f"no evidence #{options['evidence_id']}")
        try:
            exported = pointers.pointer_export(evidence=evidence)
        except pointers.PointerExportError as exc:
            raise CommandError(f"no pointer for evidence #{evidence.pk}: {exc}") from None
        self.stderr.write(exported.path)
        self.stdout.write(exported.text, ending="")
