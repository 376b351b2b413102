"""Validation runs: start, claim, execute (with progress hooks), finish, cancel, reap.

The lifecycle, and who moves it::

    queued ──claim──▶ running ──finish──▶ error | cancelled
      │                  │ ▲      └─finish (passed/failed)─▶ publishing ──publish──▶ passed | failed
      └─cancel─▶ cancelled  │                                  ▲  (with evidence or publish_error)
                            │                                  └─ reaper: stale → published again
                            └─ reaper: heartbeat older than VALIDATION_HEARTBEAT_STALE_SECONDS
                              → re-enqueued; the next claim takes it over (attempts + 1) and
                              resumes at the check it was on, or, past VALIDATION_MAX_ATTEMPTS,
                              the run ends ``error`` saying why.

* ``run_start`` validates the request (a recipe AICR's conversion refuses, e.g. a contradictory
  GPU allocation configuration, is refused with AICR's message), creates the run and one
  ``pending`` CheckRun per selected declared check (phases in the user's order, checks in
  catalog order, as AICR runs them) and enqueues ``tasks.run_execute`` after commit. At most
  one active run per cluster is a database constraint, so two concurrent starts give one run
  and one ``RunStartError("conflict")``.
* ``run_execute`` (on a ``validation`` worker) claims by conditional UPDATE and runs the
  orchestrator with ``DbRunHooks``. Every write a worker makes after its claim is fenced by the
  attempt it claimed: a worker presumed dead that comes back finds its claim gone
  (``ClaimLost``) and stops without touching the run.
* ``run_finish`` stores the outcome (AICR's exit semantics come from the orchestrator). A
  passed/failed run is committed as ``publishing`` with that ``verdict``, then ``run_publish``
  (the one place publishing happens) builds its evidence (``services.evidence.publish_run``)
  and, in one transaction, records the evidence or the publish error *and* the verdict as the
  status: nobody sees ``passed`` without its evidence (or the reason there is none). A failure
  to publish never turns the verdict. A worker that dies while publishing leaves the run
  ``publishing``; the reaper has it published again (the bundle is a function of the run, so
  the same evidence results).
* ``publishing`` keeps pages and clients polling (``ACTIVE_RUN_STATUSES``) but is outside the
  one-active-run-per-cluster constraint: it no longer touches the cluster, and a slow evidence
  store must not hold the next run back. It cannot be cancelled: its verdict is reached.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import yaml
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone
from django.views.decorators.debug import sensitive_variables

from recipes_app.models import Recipe
from validators_app import crypto, orchestrator
from validators_app.models import (
    ACTIVE_RUN_STATUSES,
    PHASES,
    VERDICT_STATUSES,
    CheckRun,
    CheckStatus,
    Cluster,
    RunStatus,
    ValidationRun,
)
from validators_app.services import clusters

logger = logging.getLogger(__name__)

VALIDATOR_CATALOG_FILE = "validators/catalog.yaml"
MAX_ERROR_CHARS = 4000
LOG_TAIL_LINES = 200


# --- settings -----------------------------------------------------------------------------


def stale_after() -> timedelta:
    """A running run whose heartbeat is older than this has lost its worker."""
    return timedelta(seconds=float(settings.VALIDATION_HEARTBEAT_STALE_SECONDS))


def max_attempts() -> int:
    return int(settings.VALIDATION_MAX_ATTEMPTS)


# --- start ----------------------------------------------------------------------------------


class RunStartError(Exception):
    """A run that cannot start. ``code``: ``invalid`` (bad input, ``field`` names it) or
    ``conflict`` (the cluster already has an active run, ``active_run`` is it)."""

    def __init__(
        self,
        message: str,
        *,
        code: str = "invalid",
        field: str = "",
        active_run: ValidationRun | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.field = field
        self.active_run = active_run


def phases_parse(value: Any) -> tuple[str, ...]:
    """The phases to run, in the user's order, deduplicated (AICR's ``ParsePhaseSelection``):
    ``None`` or ``[]`` or ``["all"]`` → the default order; ``all`` with another phase is an
    error, as in AICR."""
    if value is None:
        return PHASES
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise RunStartError(
            "phases must be a list of phase names, e.g. "
            '["deployment", "conformance", "performance"]',
            field="phases",
        )
    names: list[str] = []
    for item in value:
        if not isinstance(item, str):
            raise RunStartError("phases must contain only phase names (strings)", field="phases")
        name = item.strip().lower()
        if name != "all" and name not in PHASES:
            raise RunStartError(
                f"unknown phase {item[:40]!r}: choose from {', '.join(PHASES)} (or all)",
                field="phases",
            )
        if name not in names:
            names.append(name)
    if "all" in names:
        if len(names) > 1:
            raise RunStartError('phase "all" cannot be combined with other phases', field="phases")
        return PHASES
    return tuple(names) or PHASES


def validator_catalog(recipe: Recipe) -> dict[str, Any]:
    """The parsed ``validators/catalog.yaml`` of the recipe's catalog (libyaml's loader: the
    pure-Python one takes ~20 ms for it, and the run page reads it on every poll for the
    budget, ``services.run_progress``)."""
    text = (recipe.catalog.files or {}).get(VALIDATOR_CATALOG_FILE) or ""
    doc = yaml.load(text, Loader=yaml.CSafeLoader) if text else None
    return doc if isinstance(doc, dict) else {}


def recipe_document(recipe: Recipe) -> dict[str, Any]:
    """The hydrated recipe the orchestrator runs (``Recipe.canonical_yaml``, parsed; libyaml's
    loader: the pure-Python one takes ~90 ms for a recipe, and every run start reads one)."""
    doc = yaml.load(recipe.canonical_yaml, Loader=yaml.CSafeLoader)
    return doc if isinstance(doc, dict) else {}


def recipe_input_problem(recipe: Recipe) -> str | None:
    """AICR's reason this recipe can run on no cluster (a contradictory GPU allocation
    configuration, an unresolvable runtime ref), or ``None``. The orchestrator applies the same
    rule again before any validator Job, for runs queued before it held."""
    try:
        orchestrator.validation_document(
            recipe_document(recipe), orchestrator.CatalogData(recipe.catalog.files or {})
        )
    except orchestrator.InvalidRecipeInput as exc:
        return str(exc)
    return None


def planned_checks(
    recipe: Recipe, phases: Sequence[str], catalog: dict[str, Any]
) -> list[tuple[str, str]]:
    """``(phase, check)`` in execution order: phases as given, checks in catalog order
    (``FilterEntriesByValidation``); declared checks the catalog lacks come last in their phase
    (the orchestrator's pre-flight ends such a run in error, as AICR does)."""
    order: dict[str, list[str]] = {}
    for entry in catalog.get("validators") or []:
        if isinstance(entry, dict):
            order.setdefault(str(entry.get("phase", "")), []).append(str(entry.get("name", "")))
    planned: list[tuple[str, str]] = []
    for phase in phases:
        declared = [str(c["name"]) for c in (recipe.checks or {}).get(phase) or []]
        in_catalog = [name for name in order.get(phase, []) if name in declared]
        unknown = [name for name in declared if name not in in_catalog]
        planned += [(phase, name) for name in dict.fromkeys(in_catalog + unknown)]
    return planned


def run_start(
    *,
    cluster: Cluster,
    recipe_name: object,  # as the API or form sent it: checked here
    phases: Any = None,
    by: Any = None,
) -> ValidationRun:
    """Create a queued run of ``recipe_name`` (in the current catalog) on ``cluster`` and
    enqueue it after commit. ``RunStartError`` names what is wrong, or the active run."""
    chosen = phases_parse(phases)
    if not isinstance(recipe_name, str) or not recipe_name.strip():
        raise RunStartError("recipe is required: the name of a recipe", field="recipe")
    recipe = (
        Recipe.objects.current().select_related("catalog").filter(name=recipe_name[:200]).first()
    )
    if recipe is None:
        raise RunStartError(
            f"no recipe named {recipe_name[:200]!r} in the current catalog", field="recipe"
        )
    problem = recipe_input_problem(recipe)
    if problem is not None:
        raise RunStartError(problem, field="recipe")
    checks = planned_checks(recipe, chosen, validator_catalog(recipe))
    now = timezone.now()
    try:
        # The savepoint keeps a caller's transaction usable after the constraint refuses us.
        with transaction.atomic():
            run = ValidationRun.objects.create(
                cluster=cluster,
                recipe=recipe,
                phases=list(chosen),
                aicr_run_id=orchestrator.generate_run_id(),
                aicr_version=aicr_version_for(recipe),
                created_by=by if getattr(by, "is_authenticated", False) else None,
                enqueued_at=now,
            )
            CheckRun.objects.bulk_create(
                CheckRun(run=run, position=i, phase=phase, name=name)
                for i, (phase, name) in enumerate(checks)
            )
            transaction.on_commit(lambda: _enqueue(run.pk))
    except IntegrityError:
        active = ValidationRun.objects.on_cluster().filter(cluster=cluster).first()
        if active is None:  # not the one-active-run constraint (it would have named a run)
            raise
        raise RunStartError(
            f"cluster {cluster.name!r} already has an active run (#{active.pk}, "
            f"{active.status}); wait for it to finish or cancel it",
            code="conflict",
            active_run=active,
        ) from None
    logger.info("validation run %s queued on cluster %s", run.pk, cluster.pk)
    return run


def aicr_version_for(recipe: Recipe) -> str:
    """The AICR version a run emulates: ``VALIDATION_AICR_VERSION`` or the catalog's label."""
    return (settings.VALIDATION_AICR_VERSION or recipe.catalog.aicr_version or "dev")[:100]


def _enqueue(run_pk: int) -> None:
    """Send the run to a ``validation`` worker. A broker that is down does not fail the start
    (the run is committed): the run is marked unsent and the reaper sends it on its next pass."""
    from validators_app import tasks  # tasks import this module

    try:
        tasks.run_execute.delay(run_pk)
    except Exception:
        logger.exception("validation run %s: broker unreachable; the reaper resends it", run_pk)
        ValidationRun.objects.filter(pk=run_pk, status=RunStatus.QUEUED).update(enqueued_at=None)


# --- claim and execute ------------------------------------------------------------------------


class ClaimLost(Exception):
    """This worker's claim on the run was taken over (it was presumed dead) or the run ended."""


@dataclass(frozen=True)
class Claim:
    run: ValidationRun
    attempt: int


def run_claim(*, run_id: int) -> Claim | None:
    """Take ``run_id`` for this worker: a queued run, or a running one whose worker stopped
    sending heartbeats (then ``attempts`` + 1 fences the old worker out). ``None`` when there
    is nothing to take (finished, or another worker is alive on it). Past the attempt cap the
    run ends ``error`` instead."""
    now = timezone.now()
    stale = Q(status=RunStatus.RUNNING) & (
        Q(heartbeat_at__lt=now - stale_after()) | Q(heartbeat_at__isnull=True)
    )
    claimable = ValidationRun.objects.filter(pk=run_id).filter(
        Q(status=RunStatus.QUEUED) | stale, attempts__lt=max_attempts()
    )
    if claimable.update(
        status=RunStatus.RUNNING,
        attempts=F("attempts") + 1,
        heartbeat_at=now,
        started_at=Coalesce(F("started_at"), Value(now)),  # a takeover keeps the first start
    ):
        run = ValidationRun.objects.select_related("cluster", "recipe", "recipe__catalog").get(
            pk=run_id
        )
        return Claim(run=run, attempt=run.attempts)
    _give_up_if_exhausted(run_id=run_id, now=now)
    return None


def _give_up_if_exhausted(*, run_id: int, now: datetime) -> None:
    """A running run with a dead worker and no attempts left ends ``error`` (never stuck)."""
    limit = max_attempts()
    with transaction.atomic():
        run = (
            ValidationRun.objects.select_for_update()
            .filter(pk=run_id, status=RunStatus.RUNNING, attempts__gte=limit)
            .filter(Q(heartbeat_at__lt=now - stale_after()) | Q(heartbeat_at__isnull=True))
            .first()
        )
        if run is None:
            return
        last = run.heartbeat_at.isoformat(timespec="seconds") if run.heartbeat_at else "never"
        where = f" during {run.phase}/{run.current_check}" if run.current_check else ""
        if run.cancel_requested:
            _end(run, status=RunStatus.CANCELLED, error="")
        else:
            _end(
                run,
                status=RunStatus.ERROR,
                error=(
                    f"the worker running this validation stopped{where} (last heartbeat "
                    f"{last}) and it had already been tried {run.attempts} time(s), the "
                    f"limit (VALIDATION_MAX_ATTEMPTS={limit}); Jobs it started on the "
                    "cluster expire through their ttlSecondsAfterFinished"
                ),
            )
    logger.warning("validation run %s gave up after %s attempts", run_id, limit)


def _end(run: ValidationRun, *, status: str, error: str) -> None:
    """Close a run without an orchestrator outcome (caller holds the row lock)."""
    now = timezone.now()
    run.status, run.error, run.finished_at = status, error[:MAX_ERROR_CHARS], now
    run.save(update_fields=["status", "error", "finished_at"])
    _close_open_checks(run, status)


def _close_open_checks(run: ValidationRun, status: str) -> None:
    """A check left ``running`` when the run ended did not finish: it becomes ``other``
    (AICR's status for "no verdict"), saying so. ``pending`` ones never ran and stay so."""
    run.checks.filter(status=CheckStatus.RUNNING).update(
        status=CheckStatus.OTHER,
        message=f"the run ended ({status}) before this check finished",
        finished_at=timezone.now(),
    )


def spec_for(run: ValidationRun) -> orchestrator.RunSpec:
    """The orchestrator's input for ``run``; on a takeover, with the snapshot and the checks
    an earlier attempt finished, so it resumes at the check it was on."""
    completed = tuple(
        _outcome_from(check)
        for check in run.checks.exclude(status__in=(CheckStatus.PENDING, CheckStatus.RUNNING))
        .exclude(exit_code=None)
        .order_by("position")
    )
    return orchestrator.RunSpec(
        run_id=run.aicr_run_id,
        recipe=recipe_document(run.recipe),
        validator_catalog=validator_catalog(run.recipe),
        phases=tuple(run.phases),
        aicr_version=run.aicr_version,
        aicr_commit=settings.VALIDATION_AICR_COMMIT,
        namespace=settings.VALIDATION_NAMESPACE,
        agent_image=settings.VALIDATION_AGENT_IMAGE,
        image_registry=settings.VALIDATION_IMAGE_REGISTRY,
        image_tag=settings.VALIDATION_IMAGE_TAG,
        snapshot_timeout_s=float(settings.VALIDATION_SNAPSHOT_TIMEOUT_SECONDS),
        refuse_mutable_images=bool(settings.VALIDATION_REFUSE_MUTABLE_IMAGES),
        snapshot_yaml=run.snapshot_yaml or None,
        completed=completed,
        catalog_files=run.recipe.catalog.files or {},
        **_scheduling_for(run.cluster),
    )


@sensitive_variables("token")
def _scheduling_for(cluster: Cluster) -> dict[str, Any]:
    """The cluster's scheduling settings and check inputs as RunSpec fields. The HF token is
    decrypted here, on the worker, only to go into inference-perf's Job env (as AICR does)."""
    token = crypto.secret_decrypt(cluster.hf_token_encrypted) if cluster.hf_token_encrypted else ""
    agent = cluster.agent_tolerations
    return {
        "image_pull_secrets": tuple(cluster.image_pull_secrets),
        "node_selector": dict(cluster.node_selector),
        "tolerations": tuple(cluster.tolerations),
        "agent_tolerations": None if agent is None else tuple(agent),
        "check_inputs": orchestrator.CheckInputs(
            hf_token=token,
            require_scoped_inference_gateway=cluster.require_scoped_inference_gateway,
            nccl_fabric=cluster.nccl_fabric,
            inference_perf_no_cleanup=cluster.inference_perf_no_cleanup,
        ),
    }


def _outcome_from(check: CheckRun) -> orchestrator.CheckOutcome:
    return orchestrator.CheckOutcome(
        phase=check.phase,
        name=check.name,
        status=check.status,
        exit_code=check.exit_code if check.exit_code is not None else -1,
        message=check.message,
        duration_ms=check.duration_ms or 0,
        stdout=tuple(check.stdout),
        extra=dict(check.extra),
        job_name=check.job_name,
        image=check.image,
        image_digest=check.image_digest,
    )


class DbRunHooks:
    """``orchestrator.RunHooks`` writing progress to the database, fenced by the claim."""

    def __init__(self, claim: Claim) -> None:
        self.run_pk = claim.run.pk
        self.attempt = claim.attempt
        # Heartbeats are written at most this often; well inside the stale threshold.
        self.interval = max(0.2, float(settings.VALIDATION_HEARTBEAT_STALE_SECONDS) / 6)
        self._last_beat = 0.0
        self._last_cancel_check = 0.0
        self._cancelled = False

    def _mine(self) -> Any:
        return ValidationRun.objects.filter(
            pk=self.run_pk, attempts=self.attempt, status=RunStatus.RUNNING
        )

    def _touch(self, **fields: Any) -> None:
        if not self._mine().update(heartbeat_at=timezone.now(), **fields):
            raise ClaimLost(f"run {self.run_pk}: attempt {self.attempt} no longer holds it")
        self._last_beat = time.monotonic()

    def snapshot_taken(self, snapshot_yaml: str, agent_image: str, agent_digest: str) -> None:
        self._touch(
            snapshot_yaml=snapshot_yaml,
            agent_image=agent_image[:512],
            agent_image_digest=agent_digest[:71],
        )

    def phase_started(self, phase: str) -> None:
        self._touch(phase=phase, current_check="")

    def check_started(self, phase: str, name: str, job_name: str) -> None:
        with transaction.atomic():
            self._touch(phase=phase, current_check=name)
            _check_row(self.run_pk, phase, name).update(
                status=CheckStatus.RUNNING, job_name=job_name[:63], started_at=timezone.now()
            )

    def check_finished(self, outcome: orchestrator.CheckOutcome) -> None:
        with transaction.atomic():
            self._touch()
            _store_outcome(self.run_pk, outcome)

    def heartbeat(self) -> None:
        if time.monotonic() - self._last_beat >= self.interval:
            self._touch()

    def cancel_requested(self) -> bool:
        if not self._cancelled and time.monotonic() - self._last_cancel_check >= 0.5:
            self._last_cancel_check = time.monotonic()
            self._cancelled = ValidationRun.objects.filter(
                pk=self.run_pk, cancel_requested=True
            ).exists()
        return self._cancelled


def _check_row(run_pk: int, phase: str, name: str) -> Any:
    return CheckRun.objects.filter(run_id=run_pk, phase=phase, name=name)


def _storable(text: str) -> str:
    """A container may write NUL (valid UTF-8, kept in the CTRF as ``\\u0000``); PostgreSQL
    text and jsonb cannot hold it, so the stored copy shows U+FFFD there instead."""
    return text.replace("\x00", "\ufffd")


def _store_outcome(run_pk: int, outcome: orchestrator.CheckOutcome) -> None:
    fields = {
        "status": outcome.status if outcome.status in CheckStatus.values else CheckStatus.OTHER,
        "exit_code": outcome.exit_code,
        "message": _storable(outcome.message),
        "duration_ms": max(0, int(outcome.duration_ms)),
        "stdout": [_storable(line) for line in outcome.stdout],
        "extra": {_storable(k): _storable(v) for k, v in outcome.extra.items()},
        "job_name": outcome.job_name[:63],
        "image": _storable(outcome.image)[:512],
        "image_digest": outcome.image_digest[:71],
        "finished_at": timezone.now(),
    }
    if not _check_row(run_pk, outcome.phase, outcome.name).update(**fields):
        # Not planned at start (the orchestrator ran it, so it belongs in the record).
        position = CheckRun.objects.filter(run_id=run_pk).count()
        CheckRun.objects.create(
            run_id=run_pk, position=position, phase=outcome.phase, name=outcome.name, **fields
        )


def run_execute(*, run_id: int) -> ValidationRun | None:
    """Claim ``run_id`` and run it to the end on this worker; ``None`` when there was nothing
    to claim or the claim was lost midway (another worker owns the run now)."""
    claim = run_claim(run_id=run_id)
    if claim is None:
        return None
    run = claim.run
    hooks = DbRunHooks(claim)
    try:
        spec = spec_for(run)
        with clusters.cluster_api_client(run.cluster) as api:
            outcome = orchestrator.run_validation(api, spec, hooks)
    except ClaimLost:
        logger.warning("validation run %s: claim lost, leaving it to its new worker", run_id)
        return None
    except SoftTimeLimitExceeded:
        limit = settings.VALIDATION_RUN_TIME_LIMIT_SECONDS
        outcome = orchestrator.RunOutcome(
            status="error",
            error=f"the run took longer than VALIDATION_RUN_TIME_LIMIT_SECONDS ({limit} s)",
            snapshot_yaml=None,
        )
    except Exception as exc:
        # The orchestrator maps every cluster failure to an outcome; reaching here is a bug or
        # an unusable kubeconfig: the run still ends, saying what happened.
        logger.exception("validation run %s failed inside the worker", run_id)
        outcome = orchestrator.RunOutcome(
            status="error",
            error=f"the worker could not run the validation: {type(exc).__name__}: {exc}",
            snapshot_yaml=None,
        )
    return run_finish(claim=claim, outcome=outcome)


# --- finish -----------------------------------------------------------------------------------


def run_finish(*, claim: Claim, outcome: orchestrator.RunOutcome) -> ValidationRun | None:
    """Store ``outcome`` on the claimed run; a passed or failed one is stored ``publishing``
    with that verdict and then published (``run_publish`` makes the verdict its status)."""
    status = outcome.status if outcome.status in RunStatus.values else RunStatus.ERROR
    if status in ACTIVE_RUN_STATUSES:
        status = RunStatus.ERROR
    with transaction.atomic():
        # Row lock: cancel() and the reaper read-modify-write this row too.
        run = (
            ValidationRun.objects.select_for_update()
            .filter(pk=claim.run.pk, attempts=claim.attempt, status=RunStatus.RUNNING)
            .first()
        )
        if run is None:
            logger.warning("validation run %s: finished after losing its claim", claim.run.pk)
            return None
        for check in outcome.checks:
            _store_outcome(run.pk, check)
        publishing = status in VERDICT_STATUSES
        run.status = RunStatus.PUBLISHING if publishing else status
        run.verdict = status if publishing else ""
        # The reason may quote the cluster (an agent's log, an API server's message).
        error = _storable(outcome.error or "")[:MAX_ERROR_CHARS]
        run.error = error if status == RunStatus.ERROR else ""
        if outcome.snapshot_yaml:
            run.snapshot_yaml = outcome.snapshot_yaml
        if outcome.agent_image:  # "" on a resumed run: the first attempt's hook stored it
            run.agent_image = outcome.agent_image[:512]
            run.agent_image_digest = outcome.agent_image_digest[:71]
        # AICR writes no CTRF for a run that errored (readiness, pre-flight, …) or was stopped.
        keep_reports = publishing
        run.phase_reports = (
            {p: bytes(b).decode() for p, b in outcome.phase_reports.items()} if keep_reports else {}
        )
        run.ctrf = bytes(outcome.merged_report) if keep_reports and outcome.merged_report else None
        run.current_check = ""
        run.finished_at = run.heartbeat_at = timezone.now()
        run.save(
            update_fields=[
                "status",
                "verdict",
                "error",
                "snapshot_yaml",
                "agent_image",
                "agent_image_digest",
                "phase_reports",
                "ctrf",
                "current_check",
                "finished_at",
                "heartbeat_at",
            ]
        )
        _close_open_checks(run, status)
    logger.info("validation run %s finished: %s", run.pk, status)
    if publishing:
        return run_publish(run=run)
    return run


def run_publish(*, run: ValidationRun) -> ValidationRun:
    """Publish ``run`` as signed evidence (``services.evidence.publish_run``): the one place
    this happens. A ``publishing`` run becomes its verdict in the transaction that records the
    evidence or the publish error; a passed/failed run (``publish_runs``) gets its evidence
    recorded. A failure is recorded and logged, never turns the verdict, and never replaces
    evidence another publish of the same run already recorded. With evidence, the push to the
    OCI registry when one is configured (``services.publication``: its own record, never
    raising, retryable) comes first, so a run still ``publishing`` is the only one whose push
    outcome is not yet recorded. Returns the run as stored."""
    try:
        from validators_app.services.evidence import publish_run

        evidence, error = publish_run(run), ""
    except Exception as exc:
        logger.exception("validation run %s: publishing as evidence failed", run.pk)
        evidence = None
        error = _storable(f"publishing as evidence failed: {type(exc).__name__}: {exc}")
    if evidence is not None:
        from validators_app.services.publication import push_run_evidence

        run.evidence = evidence
        push_run_evidence(run)  # never raises; a failed push is stored, retryable
    with transaction.atomic():
        locked = ValidationRun.objects.select_for_update().filter(pk=run.pk).first()
        if locked is None:
            return run
        if locked.status == RunStatus.PUBLISHING:
            locked.status = locked.verdict
        elif locked.status not in VERDICT_STATUSES or (evidence is None and locked.evidence_id):
            return locked
        locked.evidence, locked.publish_error = evidence, error[:MAX_ERROR_CHARS]
        locked.heartbeat_at = timezone.now()
        locked.save(update_fields=["status", "evidence", "publish_error", "heartbeat_at"])
    logger.info("validation run %s published: %s", run.pk, locked.status)
    return locked


def run_publish_stalled(*, run_id: int) -> ValidationRun | None:
    """Publish ``run_id`` if it is still ``publishing`` (its worker died mid-publish)."""
    run = (
        ValidationRun.objects.select_related("cluster", "recipe", "recipe__catalog")
        .filter(pk=run_id, status=RunStatus.PUBLISHING)
        .first()
    )
    return run_publish(run=run) if run is not None else None


# --- cancel -----------------------------------------------------------------------------------


class RunCancelError(Exception):
    """The run cannot be cancelled: ``code`` ``finished``."""

    def __init__(self, message: str, *, code: str = "finished") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def run_cancel(*, run: ValidationRun, by: Any = None) -> ValidationRun:
    """A queued run ends ``cancelled`` at once; a running one is flagged and its worker's
    orchestrator deletes the Job in flight and the run's objects, then ends it ``cancelled``."""
    with transaction.atomic():
        # Row lock: the worker's claim and finish change status concurrently.
        locked = ValidationRun.objects.select_for_update().get(pk=run.pk)
        if locked.status == RunStatus.QUEUED:
            _end(locked, status=RunStatus.CANCELLED, error="")
        elif locked.status == RunStatus.RUNNING:
            if not locked.cancel_requested:
                locked.cancel_requested = True
                locked.save(update_fields=["cancel_requested"])
        elif locked.status == RunStatus.PUBLISHING:
            raise RunCancelError(
                f"run #{locked.pk} already finished ({locked.verdict}); its evidence is being "
                "published"
            )
        else:
            raise RunCancelError(f"run #{locked.pk} already finished ({locked.status})")
    logger.info("validation run %s: cancel requested by user %s", run.pk, getattr(by, "pk", None))
    return locked


# --- reaper -----------------------------------------------------------------------------------


def runs_reap() -> list[int]:
    """Re-enqueue every run that lost its worker (running, heartbeat stale) or its message
    (queued, last sent long ago); the claim decides, so a duplicate message is harmless.
    Returns the ids re-enqueued."""
    now = timezone.now()
    stale = now - stale_after()
    requeue_queued = now - timedelta(seconds=float(settings.VALIDATION_REQUEUE_QUEUED_SECONDS))
    dead = ValidationRun.objects.filter(
        Q(status=RunStatus.RUNNING) & (Q(heartbeat_at__lt=stale) | Q(heartbeat_at__isnull=True))
    ).values_list("pk", "attempts")
    lost = ValidationRun.objects.filter(
        Q(status=RunStatus.QUEUED)
        & (Q(enqueued_at__lt=requeue_queued) | Q(enqueued_at__isnull=True))
    ).values_list("pk", "attempts")
    limit = max_attempts()
    ids: list[int] = _republish_stalled(stale=stale, now=now)
    for run_id, attempts in [*dead[:500], *lost[:500]]:
        if attempts >= limit:
            _give_up_if_exhausted(run_id=run_id, now=now)
            continue
        ValidationRun.objects.filter(pk=run_id).update(enqueued_at=now)
        _enqueue(run_id)
        ids.append(run_id)
    if ids:
        logger.warning("validation runs re-enqueued by the reaper: %s", ids)
    return ids


def _republish_stalled(*, stale: datetime, now: datetime) -> list[int]:
    """Send each run stuck in ``publishing`` (no word for the stale interval) to be published
    again; the heartbeat is moved first so the next pass does not send it twice."""
    from validators_app import tasks  # tasks import this module

    silent = Q(heartbeat_at__lt=stale) | Q(heartbeat_at__isnull=True)
    stalled = ValidationRun.objects.filter(silent, status=RunStatus.PUBLISHING)
    ids = []
    for run_id in stalled.values_list("pk", flat=True)[:500]:
        if not stalled.filter(pk=run_id).update(heartbeat_at=now):
            continue  # published meanwhile, or another reaper pass took it
        try:
            tasks.run_publish.delay(run_id)
        except Exception:
            logger.exception("validation run %s: broker unreachable; publishing later", run_id)
            continue
        ids.append(run_id)
    return ids


def log_tail(check: CheckRun, lines: int = LOG_TAIL_LINES) -> list[str]:
    """The last ``lines`` processed log lines of a check, for pages."""
    return check.stdout[-lines:]
