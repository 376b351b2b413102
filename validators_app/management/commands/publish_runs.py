"""Publish finished runs that have no evidence yet (e.g. after the site key was configured)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from validators_app.models import RunStatus, ValidationRun
from validators_app.services import runs


class Command(BaseCommand):
    help = (
        "Publish passed and failed validation runs that have no evidence as signed evidence "
        "(through the same ingest as uploads); prints each run's outcome."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--run", type=int, action="append", help="only this run id")

    def handle(self, *args: Any, **options: Any) -> None:
        pending = ValidationRun.objects.filter(
            status__in=[RunStatus.PASSED, RunStatus.FAILED], evidence__isnull=True
        ).select_related("cluster", "recipe", "recipe__catalog")
        if options["run"]:
            pending = pending.filter(pk__in=options["run"])
        published = failed = 0
        for run in pending.order_by("pk"):
            run = runs.run_publish(run=run)
            if run.evidence_id is not None:
                published += 1
                self.stdout.write(f"run {run.pk}: evidence #{run.evidence_id}")
            else:
                failed += 1
                self.stdout.write(f"run {run.pk}: {run.publish_error}")
        self.stdout.write(f"{published} published, {failed} failed.")
