"""Create the development key for cluster kubeconfigs (what `make run` needs), or print one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet
from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from validators_app.crypto import ensure_local_key


class Command(BaseCommand):
    # It makes the secret a production site refuses to start without (aicr_site.E010).
    requires_system_checks: list[str] = []
    help = (
        "Generate the local Fernet key that encrypts cluster kubeconfigs in development "
        "(DEBUG and no CLUSTER_KUBECONFIG_KEY); --print shows a fresh key for production."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--print",
            action="store_true",
            help="Print a new key for CLUSTER_KUBECONFIG_KEY instead of writing a file.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["print"]:
            self.stdout.write(Fernet.generate_key().decode("ascii"))
            return
        if settings.CLUSTER_KUBECONFIG_KEYS:
            self.stdout.write("CLUSTER_KUBECONFIG_KEY is set; no local key needed.")
            return
        local = settings.CLUSTER_KUBECONFIG_LOCAL_KEY_FILE
        if local is None:
            self.stderr.write(
                "DEBUG is off and CLUSTER_KUBECONFIG_KEY is not set: set it (see --print)."
            )
            raise SystemExit(1)
        created = ensure_local_key(Path(local))
        self.stdout.write(f"{'Created' if created else 'Kept'} the local key file {local}.")
