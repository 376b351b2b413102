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
    # The orchestrator's verdict (``ValidationRun.verdict``) is stored and its evidence is being
    # published: the run shows passed/failed only together with its evidence or publish error.
    PUBLISHING = "publishing"
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    CANCELLED = "cancelled"


# Still changing: pages and clients keep polling. A publishing run no longer uses its cluster.
ACTIVE_RUN_STATUSES = (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.PUBLISHING)
# Using the cluster: at most one such run per cluster (a database constraint), cancellable.
CLUSTER_RUN_STATUSES = (RunStatus.QUEUED, RunStatus.RUNNING)
VERDICT_STATUSES = (RunStatus.PASSED, RunStatus.FAILED)
FINISHED_RUN_STATUSES = (RunStatus.PASSED, RunStatus.FAILED, RunStatus.ERROR, RunStatus.CANCELLED)


class CheckStatus(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    OTHER = "other"


def _image_field(help_text: str) -> models.CharField:
    return models.CharField(max_length=512, blank=True, help_text=help_text)


def _digest_field(reporter: str) -> models.CharField:
    # "sha256:" + 64 hex, only as the kubelet reported it (orchestrator.images.repo_digest).
    return models.CharField(
        max_length=71,
        blank=True,
        help_text=f"sha256 repository digest {reporter} reported (imageID); blank = not reported.",
    )


class ValidationRunQuerySet(models.QuerySet["ValidationRun"]):
    def active(self) -> ValidationRunQuerySet:
        return self.filter(status__in=ACTIVE_RUN_STATUSES)

    def on_cluster(self) -> ValidationRunQuerySet:
        """Runs using their cluster (the one-active-run-per-cluster constraint's rows)."""
        return self.filter(status__in=CLUSTER_RUN_STATUSES)

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
    agent_image = _image_field("The image the snapshot agent's pod ran.")
    agent_image_digest = _digest_field("the agent's pod")
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
    verdict = models.CharField(
        max_length=10,
        blank=True,
        choices=[(s.value, s.label) for s in VERDICT_STATUSES],
        help_text="The orchestrator's passed/failed, stored while the run is publishing.",
    )
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
            # ``publishing`` is not in it: publishing touches only this site's database and
            # evidence store, so the next run on the cluster need not wait for it.
            models.UniqueConstraint(
                fields=["cluster"],
                condition=models.Q(status__in=["queued", "running"]),
                name="validationrun_one_active_per_cluster",
            ),
            models.CheckConstraint(
                condition=models.Q(
                    status__in=[
                        "queued",
                        "running",
                        "publishing",
                        "passed",
                        "failed",
                        "error",
                        "cancelled",
                    ]
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
        """Still changing (queued, running or publishing): pages keep refreshing."""
        return self.status in ACTIVE_RUN_STATUSES

    @property
    def is_cancellable(self) -> bool:
        return self.status in CLUSTER_RUN_STATUSES

    @property
    def outcome_status(self) -> str:
        """passed/failed once the orchestrator decided (also while publishing), else status."""
        return self.verdict if self.status == RunStatus.PUBLISHING else self.status

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
    image = _image_field("The image the validator container ran.")
    image_digest = _digest_field("the pod")
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


# --- Publishing run evidence to an OCI registry ---------------------------------------------


class PushState(models.TextChoices):
    PUSHED = "pushed", "Pushed and verified"
    FAILED = "failed", "Push failed (retryable)"
    SKIPPED = "skipped", "Not pushed"


class RunOciPublication(models.Model):
    """Where a run's evidence went in the OCI registry, or why it did not get there.

    ``pushed`` is written only after the artifact and its signature are in the registry and
    the site pulled them back and verified them; ``pointer_yaml`` is then the file AICR's
    repository takes (keyless evidence only; blank with the reason for key-signed evidence).
    A failure leaves the run's verdict and evidence as they were (``services.publication``).
    """

    run = models.OneToOneField(
        ValidationRun, on_delete=models.CASCADE, related_name="oci_publication"
    )
    state = models.CharField(max_length=10, choices=PushState.choices)
    repository = models.CharField(max_length=500, help_text="Where it was pushed (or tried).")
    reference = models.CharField(max_length=700, blank=True, help_text="registry/repo:tag")
    oci_ref = models.CharField(
        max_length=700, blank=True, help_text="registry/repository@sha256:<manifest digest>"
    )
    referrer_digest = models.CharField(max_length=71, blank=True)
    keyless = models.BooleanField(default=False)
    pointer_path = models.CharField(max_length=500, blank=True)
    pointer_yaml = models.TextField(blank=True)
    reason = models.TextField(
        blank=True, help_text="Why the push failed or was skipped, or why there is no pointer."
    )
    attempts = models.PositiveIntegerField(default=0)
    pushed_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(state__in=["pushed", "failed", "skipped"]),
                name="runocipublication_state_valid",
            ),
            models.CheckConstraint(
                condition=~models.Q(state="pushed") | ~models.Q(oci_ref=""),
                name="runocipublication_pushed_has_ref",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.run} → {self.oci_ref or self.state}"
