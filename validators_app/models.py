"""GPU clusters maintainers connected, and validation runs against them.

A cluster's kubeconfig is a credential: it is stored only encrypted
(``validators_app.crypto``), decrypted only on the worker that talks to the cluster, and never
shown back (not in ``__str__``/``repr``, the admin, the API, pages or logs).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Environment(models.TextChoices):
    REAL = "real", "Real hardware"
    SIMULATED = "simulated", "Simulated (test double, never counts)"


class ClusterQuerySet(models.QuerySet["Cluster"]):
    def simulated(self) -> ClusterQuerySet:
        return self.filter(environment=Environment.SIMULATED)

    def real(self) -> ClusterQuerySet:
        return self.filter(environment=Environment.REAL)


class Cluster(models.Model):
    """A Kubernetes cluster validation runs can target.

    ``server``, ``context_name`` and ``auth_kind`` are what the kubeconfig check found, kept in
    clear so pages can show where a cluster points without decrypting anything.
    """

    name = models.CharField(max_length=100, unique=True)
    environment = models.CharField(max_length=20, choices=Environment.choices)
    server = models.CharField(max_length=2048, help_text="API server URL from the kubeconfig.")
    context_name = models.CharField(max_length=253, blank=True)
    auth_kind = models.CharField(max_length=40, blank=True)
    # A Fernet token (urlsafe base64 text) of the kubeconfig's UTF-8 bytes; never decrypted
    # outside validators_app.crypto.
    kubeconfig_encrypted = models.TextField(editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # The last "Test connection": None until tested.
    last_test_ok = models.BooleanField(null=True, blank=True)
    last_test_server_version = models.CharField(max_length=100, blank=True)
    last_test_detail = models.TextField(blank=True)
    last_tested_at = models.DateTimeField(null=True, blank=True)

    objects = ClusterQuerySet.as_manager()

    class Meta:
        ordering = ("name",)
        constraints = [
            models.CheckConstraint(
                condition=models.Q(environment__in=["real", "simulated"]),
                name="cluster_environment_valid",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        # Spelled out so no future field (or a decrypted attribute) leaks into a traceback.
        return f"<Cluster {self.pk}: {self.name} ({self.environment})>"

    @property
    def is_simulated(self) -> bool:
        return self.environment == Environment.SIMULATED
