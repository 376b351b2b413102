"""manage.py refresh_consensus: recompute every stored consensus badge."""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand

from evidence_app.consensus import stored


class Command(BaseCommand):
    help = (
        "Recompute and store every recipe's consensus badge (the services keep them current; "
        "run this after changing EVIDENCE_STALE_AFTER_DAYS, which moves every expiry)."
    )

    def handle(self, *args: object, **options: object) -> None:
        start = time.perf_counter()
        badges = stored.consensus_refresh()
        elapsed = time.perf_counter() - start
        self.stdout.write(f"{badges} recipe badges stored in {elapsed:.2f} s")
