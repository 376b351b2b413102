"""``manage.py push_run_evidence [--run ID]``: push published runs' evidence to the OCI
registry (``RUN_EVIDENCE_OCI_REPOSITORY``) where it is not there yet: runs whose push failed
(registry down, credentials refused) or that were published before a repository was set.
A pushed run is left alone. Exit 2 when no repository is configured."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Q

from validators_app.models import PushState, ValidationRun
from validators_app.services.publication import push_repository, push_run_evidence


class Command(BaseCommand):
    help = (
        "Push the evidence of published validation runs that is not in the OCI registry yet "
        "(failed or never tried); prints each run's outcome."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--run", type=int, action="append", help="only this run id")

    def handle(self, *args: Any, **options: Any) -> None:
        if not push_repository():
            raise CommandError(
                "RUN_EVIDENCE_OCI_REPOSITORY is not set: there is no registry to push to",
                returncode=2,
            )
        pending = (
            ValidationRun.objects.filter(evidence__isnull=False)
            .filter(Q(oci_publication__isnull=True) | Q(oci_publication__state=PushState.FAILED))
            .select_related("cluster", "recipe", "recipe__catalog")
        )
        if options["run"]:
            pending = pending.filter(pk__in=options["run"])
        counts = {state: 0 for state in PushState.values}
        for run in pending.order_by("pk"):
            publication = push_run_evidence(run)
            if publication is None:
                continue
            counts[publication.state] += 1
            shown = publication.oci_ref or publication.reason
            self.stdout.write(f"run {run.pk}: {publication.state}: {shown}")
        self.stdout.write(", ".join(f"{n} {state}" for state, n in counts.items()) + ".")
