"""A faithful Python port of ``aicr validate``'s orchestrator (AICR main-08), with no Django import.

Runs AICR's own containers (the snapshot agent and the validator images of the catalog) on a
cluster through the official ``kubernetes`` client and reads their results as AICR does, so a
run here and ``aicr validate`` on the same cluster give the same CTRF bytes. The contract is
``AICR-VALIDATE.md`` §1-§8; the module API is documented in ``docs/validation-runs.md``.

Public API:

- ``run_validation(api, spec, hooks) -> RunOutcome`` with ``RunSpec``, ``RunHooks``,
  ``CheckOutcome`` (``run``)
- ``test_connection(api, *, timeout_s=10) -> ConnectionResult`` (``connection``)
- ``generate_run_id() -> str``: AICR's ``YYYYMMDD-HHMMSS-<16 hex>``
- ``job_name(run_id, check) -> str``: the deterministic Job name a resumed run adopts
- ``resolve_image(image, *, aicr_version, aicr_commit="", image_registry="", image_tag="")``:
  AICR's validator image tag rules (§4.3), also used for the evidence predicate and BOM
- ``check_readiness(recipe, snapshot) -> ReadinessFailure | None`` and
  ``evaluate_constraint(snapshot, name, value)``: AICR's readiness gate and operators (§3)
- ``process_logs(log_bytes) -> (stdout, extra)``; ``merge_reports``/``to_bytes`` (CTRF, §6.7)
- ``validation_document(recipe, CatalogData(files))``: the run's ``validation.yaml`` with the
  GPU allocation policy resolved and a runtime ref lowered; ``InvalidRecipeInput`` (AICR's
  message) when the recipe cannot run (``conversion``, ``allocation``, ``runtime_ref``)
"""

from __future__ import annotations

import datetime as _dt
import secrets as _secrets

from .connection import test_connection
from .conversion import CatalogData, validation_document
from .ctrf import merge_reports, to_bytes
from .images import resolve_image
from .kube import RetryPolicy
from .logs import process_logs
from .model import (
    PHASE_ORDER,
    CheckInputs,
    CheckOutcome,
    ConnectionResult,
    InvalidRecipeInput,
    RunHooks,
    RunOutcome,
    RunSpec,
)
from .plan import job_name
from .readiness import ReadinessFailure, check_readiness, evaluate_constraint
from .run import run_validation

__all__ = [
    "PHASE_ORDER",
    "CatalogData",
    "CheckInputs",
    "CheckOutcome",
    "ConnectionResult",
    "InvalidRecipeInput",
    "ReadinessFailure",
    "RetryPolicy",
    "RunHooks",
    "RunOutcome",
    "RunSpec",
    "check_readiness",
    "evaluate_constraint",
    "generate_run_id",
    "job_name",
    "merge_reports",
    "process_logs",
    "resolve_image",
    "run_validation",
    "test_connection",
    "to_bytes",
    "validation_document",
]


def generate_run_id(now: _dt.datetime | None = None) -> str:
    """GenerateRunID: ``YYYYMMDD-HHMMSS-<16 hex>`` (local time + 8 random bytes)."""
    stamp = (now or _dt.datetime.now()).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{_secrets.token_hex(8)}"
