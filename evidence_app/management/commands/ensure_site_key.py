"""Create the development signing key for run evidence (what `make run` needs), or print one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from evidence_app.services.site_key import ensure_local_site_key, generate_pem


class Command(BaseCommand):
    # It makes the secret a production site refuses to start without (aicr_site.E010).
    requires_system_checks: list[str] = []
    help = (
        "Generate the local ECDSA P-256 key that signs validation-run evidence in development "
        "(DEBUG and no SITE_SIGNING_KEY); --print shows a fresh PEM key for production."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--print",
            action="store_true",
            help="Print a new private key (PEM) for SITE_SIGNING_KEY instead of writing a file.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["print"]:
            self.stdout.write(generate_pem().decode("ascii"), ending="")
            return
        if settings.SITE_SIGNING_KEY:
            self.stdout.write("SITE_SIGNING_KEY is set; no local key needed.")
            return
        local = settings.SITE_SIGNING_LOCAL_KEY_FILE
        if local is None:
            self.stderr.write("DEBUG is off and SITE_SIGNING_KEY is not set: set it (see --print).")
            raise SystemExit(1)
        created = ensure_local_site_key(Path(local))
        self.stdout.write(f"{'Created' if created else 'Kept'} the local site key file {local}.")
