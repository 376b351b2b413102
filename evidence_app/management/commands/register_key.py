"""``manage.py register_key --name NAME FILE [--by USERNAME]``: register a public key (FILE a
PEM path, ``-`` for stdin) and print its fingerprint.

The same registration as the admin and ``POST /api/v1/keys/`` (``services.keys``). Exit 0 on
success; otherwise a ``CommandError`` (exit 1) whose message names the problem, the key
already registered included (nothing changes then).
"""

from __future__ import annotations

import sys
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from evidence_app.services import keys

# Read no more than a key can be (the service names anything longer as too long).
_MAX_READ = 4 * keys.MAX_PEM_CHARS


class Command(BaseCommand):
    help = (
        "Register a PEM public key (ECDSA P-256 or Ed25519) so the evidence it signs counts, "
        "and print its fingerprint (sha256 of the DER SubjectPublicKeyInfo)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="The PEM public key file, or - for stdin.")
        parser.add_argument("--name", required=True, help="What the key is (shown with it).")
        parser.add_argument("--by", help="The username recorded as having registered it.")

    def handle(self, *args: object, **options: object) -> None:
        pem = self._read(str(options["file"]))
        by = None
        if options.get("by"):
            username = str(options["by"])
            by = get_user_model().objects.filter(username=username).first()
            if by is None:
                raise CommandError(f"--by: no user named {username!r}.")
        try:
            key = keys.signing_key_register(name=str(options["name"]), public_key_pem=pem, by=by)
        except ValidationError as exc:
            what = "--name" if getattr(exc, "code", None) in keys.NAME_ERROR_CODES else "key"
            raise CommandError(f"{what}: {exc.messages[0]}") from None
        self.stderr.write(f"Registered {key.name!r} ({key.algorithm}, id {key.pk}).")
        self.stdout.write(key.fingerprint)

    def _read(self, file: str) -> bytes:
        if file == "-":
            return sys.stdin.buffer.read(_MAX_READ)
        path = Path(file)
        try:
            with path.open("rb") as handle:
                return handle.read(_MAX_READ)
        except OSError as exc:
            raise CommandError(f"cannot read {file}: {exc.strerror or exc}") from None
