"""manage.py create_token USERNAME --role ROLE: print a new API token (shown once)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandParser

from evidence_app.models import Role
from evidence_app.services.tokens import token_create, user_with_role


class Command(BaseCommand):
    help = (
        "Create an API token for USERNAME (the user is created when missing and added to the "
        "group named after the role) and print it. Only its sha256 is stored: copy it now."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--role", required=True, choices=Role.values)

    def handle(self, *args: object, **options: object) -> None:
        user = user_with_role(username=str(options["username"]), role=str(options["role"]))
        row, token = token_create(user=user, role=str(options["role"]))
        self.stderr.write(
            f"Token {row.prefix}… for {user.get_username()} ({row.role}); it is shown only once."
        )
        self.stdout.write(token)
