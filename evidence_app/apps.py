from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _consensus_backfill(**kwargs: Any) -> None:
    """A database migrated from before stored consensus badges existed gets them filled."""
    from evidence_app.consensus import stored  # models are ready only after setup

    stored.backfill_if_empty()


class EvidenceConfig(AppConfig):
    name = "evidence_app"

    def ready(self) -> None:
        post_migrate.connect(_consensus_backfill, sender=self)
