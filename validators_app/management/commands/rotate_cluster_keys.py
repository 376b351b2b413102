"""Re-encrypt every cluster's kubeconfig under the first CLUSTER_KUBECONFIG_KEY."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from validators_app.crypto import KeyUnavailable
from validators_app.services.clusters import clusters_reencrypt


class Command(BaseCommand):
    help = (
        "After putting a new key first in CLUSTER_KUBECONFIG_KEY (old keys after it), "
        "re-encrypt every stored kubeconfig with it; the old keys can then be removed."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            count = clusters_reencrypt()
        except KeyUnavailable as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"Re-encrypted {count} cluster kubeconfig(s) under the first key.")
