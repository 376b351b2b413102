"""Wait, bounded and logged, until PostgreSQL and the broker answer (aicr_site/startup.py):
compose's web service runs it before ``migrate``, so the site may start before its database."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from aicr_site.startup import DEPENDENCIES, DependencyTimeout, wait_for_dependencies


class Command(BaseCommand):
    help = "Wait until the database and the broker answer (at most --timeout seconds)."
    # The secrets check runs anyway at the next command (migrate); nothing here needs it first.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--timeout", type=float, default=None, help="default 120 s")
        parser.add_argument(
            "--only", choices=sorted(DEPENDENCIES), action="append", help="wait for this one"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        names = options["only"] or list(DEPENDENCIES)
        try:
            wait_for_dependencies(names, timeout=options["timeout"])
        except DependencyTimeout as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"answering: {', '.join(names)}")
