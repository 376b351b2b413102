"""manage.py seed_demo: clearly-labelled demo evidence for a fresh site (idempotent)."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from evidence_app.services.demo import seed_demo


class Command(BaseCommand):
    help = (
        "Register the DEMO signing keys and ingest demo evidence (key-signed AICR evidence "
        "directories for a few current recipes, several labs, AICR versions and dates), all "
        "labelled demo. Runs already stored are skipped. Refused in production mode "
        "(DEBUG=0) unless --allow-production: the demo keys are public."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--allow-production",
            action="store_true",
            help="seed even with DEBUG off (the demo keys are derivable by anyone)",
        )

    def handle(self, *args: object, **options: object) -> None:
        if not settings.DEBUG and not options["allow_production"]:
            raise CommandError(
                "seed_demo refuses to run with DEBUG off: its signing keys are public. "
                "Pass --allow-production to seed anyway."
            )
        result = seed_demo()
        for failure in result.failed:
            self.stderr.write(f"demo run refused: {failure}")
        self.stdout.write(
            f"Demo data: {result.created} new, {result.existing} already present, "
            f"{result.keys_created} demo key(s) registered."
        )
        if result.failed:
            raise CommandError(f"{len(result.failed)} demo run(s) failed verification")
