"""The orchestrator's public data types (the contract in docs/validation-runs.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

PHASE_ORDER: tuple[str, ...] = ("deployment", "conformance", "performance")


@dataclass(frozen=True)
class CheckOutcome:
    phase: str  # deployment | conformance | performance
    name: str  # catalog entry name, e.g. "operator-health"
    status: str  # passed | failed | skipped | other  (AICR exit-code mapping)
    exit_code: int  # -1 when the container never terminated
    message: str  # termination message / AICR's synthetic message, "" when none
    duration_ms: int
    stdout: tuple[str, ...]  # processed log lines (last 1000, 512-byte cut), as in the CTRF
    extra: Mapping[str, str]  # the last valid ##AICR-EXTRA## object
    job_name: str
    # What the kubelet reports the ``validator`` container ran: the image reference and its
    # ``sha256:`` repository digest ("" = the runtime reported none, e.g. it never started).
    image: str = ""
    image_digest: str = ""


@dataclass(frozen=True)
class CheckInputs:
    """Check-scoped forwards AICR takes from the CLI's environment (AICR-VALIDATE.md §5), each
    set only on its check's Job. ``repr`` hides the token: a RunSpec may be logged."""

    hf_token: str = field(default="", repr=False)  # HF_TOKEN, inference-perf only
    require_scoped_inference_gateway: bool = False  # inference-gateway only
    nccl_fabric: str = ""  # AICR_NCCL_FABRIC, nccl-all-reduce-bw-net only
    inference_perf_no_cleanup: bool = False  # AICR_INFERENCE_PERF_NO_CLEANUP=1, inference-perf


@dataclass(frozen=True)
class RunSpec:
    run_id: str  # AICR format YYYYMMDD-HHMMSS-<16 hex>; Job names derive from it
    recipe: Mapping[str, Any]  # the hydrated recipe (Recipe.canonical_yaml, parsed)
    validator_catalog: Mapping[str, Any]  # parsed validators/catalog.yaml of the recipe's catalog
    phases: tuple[str, ...] = PHASE_ORDER  # in the user's order
    aicr_version: str = "dev"  # AICR_CLI_VERSION and image tag rules ("dev" -> :latest)
    aicr_commit: str = ""
    namespace: str = "aicr-validation"
    agent_image: str = ""  # "" -> AICR's default for aicr_version
    image_registry: str = ""  # AICR_VALIDATOR_IMAGE_REGISTRY (mirrors)
    image_tag: str = ""  # AICR_VALIDATOR_IMAGE_TAG
    snapshot_timeout_s: float = 300
    # Refuse, before anything is deployed, an agent or validator image that may name other
    # bytes tomorrow (``images.is_mutable``: not digest-pinned nor a CI-frozen AICR tag).
    refuse_mutable_images: bool = False
    snapshot_yaml: str | None = None  # resume: the snapshot an earlier attempt took
    completed: tuple[CheckOutcome, ...] = ()  # resume: checks an earlier attempt finished
    # The recipe's catalog version (path -> text): AICR's DataProvider for the values files the
    # allocation policy is resolved from and the runtime files a recipe's refs name (--data).
    catalog_files: Mapping[str, str] | None = None

    # Scheduling (aicr validate --image-pull-secret / --node-selector / --toleration):
    image_pull_secrets: tuple[str, ...] = ()  # one {name} each on the agent and validator Jobs
    node_selector: Mapping[str, str] = field(default_factory=dict)  # agent + AICR_NODE_SELECTOR
    tolerations: tuple[Mapping[str, Any], ...] = ()  # AICR_TOLERATIONS (inner workloads)
    # The agent's tolerations: None = AICR's default (tolerate every taint); () = none.
    agent_tolerations: tuple[Mapping[str, Any], ...] | None = None
    check_inputs: CheckInputs = field(default_factory=CheckInputs)


class InvalidRecipeInput(ValueError):
    """AICR's ``ErrCodeInvalidRequest`` while turning the recipe into its ValidationInput
    (allocation policy, runtime ref): the run errors before any validator Job; AICR's text."""


class RunHooks(Protocol):
    """Called on the worker thread, in order; heartbeat/cancel_requested while waiting."""

    def snapshot_taken(self, snapshot_yaml: str, agent_image: str, agent_digest: str) -> None: ...
    def phase_started(self, phase: str) -> None: ...
    def check_started(self, phase: str, name: str, job_name: str) -> None: ...
    def check_finished(self, outcome: CheckOutcome) -> None: ...
    def heartbeat(self) -> None: ...
    def cancel_requested(self) -> bool: ...


@dataclass(frozen=True)
class RunOutcome:
    status: str  # passed | failed | error | cancelled
    error: str  # AICR's message when status == "error" (e.g. readiness), else ""
    snapshot_yaml: str | None
    phase_reports: Mapping[str, bytes] = field(default_factory=dict)  # phase -> ctrf/<phase>.json
    merged_report: bytes | None = None  # MergeReports("aicr", ...) bytes; None on error/cancel
    checks: tuple[CheckOutcome, ...] = ()
    # The snapshot agent's image and digest as its pod reported them; "" on a resumed run
    # (the agent ran in an earlier attempt, whose hook recorded them).
    agent_image: str = ""
    agent_image_digest: str = ""


@dataclass(frozen=True)
class ConnectionResult:
    ok: bool
    server_version: str
    detail: str
