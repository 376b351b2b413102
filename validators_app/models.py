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


class NcclFabric(models.TextChoices):
    DEFAULT = "", "EFA (AICR's default)"
    ROCE = "roce", "RoCE"


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
    # Scheduling, as aicr validate's flags (checked by validators_app.scheduling):
    image_pull_secrets: models.JSONField[list[str], list[str]] = models.JSONField(
        default=list, blank=True, help_text="Secrets in the run's namespace (--image-pull-secret)."
    )
    node_selector: models.JSONField[dict[str, str], dict[str, str]] = models.JSONField(
        default=dict, blank=True, help_text="Agent nodeSelector and AICR_NODE_SELECTOR."
    )
    tolerations: models.JSONField[list[dict[str, object]], list[dict[str, object]]] = (
        models.JSONField(
            default=list, blank=True, help_text="AICR_TOLERATIONS for the inner workloads."
        )
    )
    # None: AICR's default for the agent (tolerate every taint); []: none.
    agent_tolerations: models.JSONField[
        list[dict[str, object]] | None, list[dict[str, object]] | None
    ] = models.JSONField(null=True, blank=True, default=None)
    # Check-scoped inputs (AICR forwards them from its CLI environment):
    # HF_TOKEN for inference-perf, a Fernet token like the kubeconfig; "" when not set.
    hf_token_encrypted = models.TextField(blank=True, default="", editable=False)
    nccl_fabric = models.CharField(
        max_length=10, choices=NcclFabric.choices, blank=True, default=NcclFabric.DEFAULT
    )
    require_scoped_inference_gateway = models.BooleanField(default=False)
    inference_perf_no_cleanup = models.BooleanField(default=False)

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

    @property
    def hf_token_set(self) -> bool:
        return bool(self.hf_token_encrypted)


# --- Validation runs ----------------------------------------------------------------------------

PHASES = ("deployment", "conformance", "performance")  # AICR's default order (PhaseOrder)


class RunStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    CANCELLED = "cancelled"


ACTIVE_RUN_STATUSES = (RunStatus.QUEUED, RunStatus.RUNNING)
FINISHED_RUN_STATUSES = (RunStatus.PASSED, RunStatus.FAILED, RunStatus.ERROR, RunStatus.CANCELLED)


class CheckStatus(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    OTHER = "other"


class ValidationRunQuerySet(models.QuerySet["ValidationRun"]):
    def active(self) -> ValidationRunQuerySet:
        return self.filter(status__in=ACTIVE_RUN_STATUSES)

    def for_listing(self) -> ValidationRunQuerySet:
        """What list pages and the API list show, without the large text and byte columns."""
        return self.select_related("cluster", "recipe", "recipe__catalog", "evidence").defer(
            "snapshot_yaml",
            "ctrf",
            "phase_reports",
            "cluster__kubeconfig_encrypted",
            "cluster__hf_token_encrypted",
        )

    def recent(self, limit: int = 10) -> ValidationRunQuerySet:
        return self.for_listing().order_by("-created_at", "-pk")[:limit]


class ValidationRun(models.Model):
    """One ``aicr validate`` of a recipe on a cluster, executed by a ``validation`` worker.

    ``attempts`` counts claims: a worker that takes the run over from a dead one increments it,
    and every write a worker makes is conditional on the attempt it claimed, so a worker that
    lost its claim can no longer change the run.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="runs")
    recipe = models.ForeignKey(
        "recipes_app.Recipe", on_delete=models.PROTECT, related_name="validation_runs"
    )
    phases: models.JSONField[list[str], list[str]] = models.JSONField(
        help_text="Phases in the order they run (the user's order)."
    )
    status = models.CharField(
        max_length=10, choices=RunStatus.choices, default=RunStatus.QUEUED, db_index=True
    )
    phase = models.CharField(max_length=20, blank=True, help_text="The phase running now.")
    current_check = models.CharField(max_length=100, blank=True)
    error = models.TextField(blank=True, help_text="Why the run ended in error (AICR's message).")
    aicr_run_id = models.CharField(
        max_length=40, unique=True, help_text="AICR run ID: YYYYMMDD-HHMMSS-<16 hex>."
    )
    aicr_version = models.CharField(
        max_length=100, help_text="The AICR version the run emulates (CTRF tool version, tags)."
    )
    snapshot_yaml = models.TextField(blank=True, help_text="The snapshot the agent took.")
    # phase → the exact CTRF document AICR writes for it (UTF-8 text of Go's JSON bytes).
    phase_reports: models.JSONField[dict[str, str], dict[str, str]] = models.JSONField(
        default=dict, blank=True
    )
    ctrf = models.BinaryField(null=True, blank=True, help_text="Merged CTRF bytes.")
    evidence = models.ForeignKey(
        "evidence_app.Evidence",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="validation_runs",
    )
    publish_error = models.TextField(blank=True, help_text="Why publishing as evidence failed.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # When the run's task was last sent to the broker: the reaper re-sends a queued run whose
    # message was lost (broker restarted, enqueue failed) once this is old.
    enqueued_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    cancel_requested = models.BooleanField(default=False)

    objects = ValidationRunQuerySet.as_manager()

    class Meta:
        ordering = ("-created_at", "-pk")
        constraints = [
            # Two concurrent starts on one cluster: the database lets exactly one in.
            models.UniqueConstraint(
                fields=["cluster"],
                condition=models.Q(status__in=["queued", "running"]),
                name="validationrun_one_active_per_cluster",
            ),
            models.CheckConstraint(
                condition=models.Q(
                    status__in=["queued", "running", "passed", "failed", "error", "cancelled"]
                ),
                name="validationrun_status_valid",
            ),
        ]
        indexes = [
            models.Index(fields=["status", "heartbeat_at"], name="validationrun_status_hb"),
            models.Index(fields=["cluster", "-created_at"], name="validationrun_cluster_recent"),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} ({self.aicr_run_id})"

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE_RUN_STATUSES

    def phase_report_bytes(self) -> dict[str, bytes]:
        """phase → the exact bytes of ``ctrf/<phase>.json``."""
        return {phase: text.encode() for phase, text in self.phase_reports.items()}


class CheckRun(models.Model):
    """One selected check of a run, created ``pending`` at start in execution order."""

    run = models.ForeignKey(ValidationRun, on_delete=models.CASCADE, related_name="checks")
    position = models.PositiveSmallIntegerField(help_text="Execution order within the run.")
    phase = models.CharField(max_length=20)
    name = models.CharField(max_length=100)
    status = models.CharField(
        max_length=10, choices=CheckStatus.choices, default=CheckStatus.PENDING
    )
    exit_code = models.IntegerField(null=True, blank=True)
    message = models.TextField(blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    # The processed log lines exactly as in the CTRF ``stdout`` (AICR bounds them: the last 1000
    # lines, each cut at 512 bytes); kept whole so a resumed run rebuilds the same CTRF.
    stdout: models.JSONField[list[str], list[str]] = models.JSONField(default=list, blank=True)
    extra: models.JSONField[dict[str, str], dict[str, str]] = models.JSONField(
        default=dict, blank=True
    )
    job_name = models.CharField(max_length=63, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("run", "position")
        constraints = [
            models.UniqueConstraint(fields=["run", "phase", "name"], name="checkrun_unique_check"),
            models.CheckConstraint(
                condition=models.Q(
                    status__in=["pending", "running", "passed", "failed", "skipped", "other"]
                ),
                name="checkrun_status_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.phase}/{self.name}"

    @property
    def is_finished(self) -> bool:
        return self.status not in (CheckStatus.PENDING, CheckStatus.RUNNING)
