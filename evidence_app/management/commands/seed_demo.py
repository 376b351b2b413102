"""manage.py seed_demo: clearly-labelled demo evidence for a fresh site (idempotent)."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from evidence_app.services.demo import seed_demo


class Command(BaseCommand):
    help = (
        "Register the DEMO signing keys and ingest demo evidence (key-signed AICR evidence "
        "directories for a few current recipes, several labs, AICR versions and dates), all "
        "labelled demo. Runs already stored are skipped. Development only: refused whenever "
        "DEBUG is off, since the demo private keys are public."
    )

    def handle(self, *args: object, **options: object) -> None:
        if not settings.DEBUG:
            raise CommandError(
                "seed_demo only runs with DEBUG on (development): the demo signing keys are "
                "derivable by anyone, so evidence they sign proves nothing. It is never run "
                "against a production site."
            )
        result = seed_demo()
        for failure in result.failed:
            self.stderr.write(f"demo run refused: {failure}")
        self.stdout.write(
            f"Demo data: {result.created} new, {result.existing} already present, "
            f"{result.keys_created} demo key(s) registered."
        )
        for name, state in result.states.items():
            self.stdout.write(f"  {state:<10} {name} (DEMO)")
        if result.failed:
            raise CommandError(f"{len(result.failed)} demo run(s) failed verification")
