"""A terminal validator Job → exit code, message, duration (AICR-VALIDATE.md §6.3-§6.5).

Pure functions over the Job and pod JSON the API returned (``run.py`` does the reads), so every
branch of AICR's ``ExtractResult`` and ``HandleTimeout`` is testable without a cluster.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .ctrf import exit_code_status
from .images import repo_digest
from .logs import cap_message, process_logs
from .model import CheckOutcome
from .plan import go_duration

__all__ = [
    "RanImage",
    "Verdict",
    "after_timeout",
    "failed_condition",
    "from_pod",
    "is_terminal",
    "outcome",
    "pick_pod",
    "ran_image",
]


@dataclass(frozen=True)
class Verdict:
    exit_code: int
    message: str
    duration_ms: int = 0
    read_logs: bool = False  # whether AICR reads the validator log in this branch


def parse_time(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _conditions(job: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    conditions = ((job or {}).get("status") or {}).get("conditions") or []
    return [c for c in conditions if isinstance(c, Mapping)]


def is_terminal(job: Mapping[str, Any] | None) -> bool:
    """Condition Complete or Failed with status True (either is a "normal" completion)."""
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in _conditions(job)
    )


def failed_condition(job: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    for cond in _conditions(job):
        if cond.get("type") == "Failed" and cond.get("status") == "True":
            return cond
    return None


def pick_pod(pods: list[dict[str, Any]]) -> dict[str, Any] | None:
    """find.go: skip terminating pods; the newest non-Failed, else the newest Failed."""
    live = [p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")]

    def created(p: Mapping[str, Any]) -> float:
        return parse_time((p.get("metadata") or {}).get("creationTimestamp")) or 0.0

    running = [p for p in live if (p.get("status") or {}).get("phase") != "Failed"]
    for group in (running, live):
        if group:
            return max(group, key=created)
    return None


def _container_status(pod: Mapping[str, Any], container: str) -> Mapping[str, Any] | None:
    for status in (pod.get("status") or {}).get("containerStatuses") or ():
        if isinstance(status, Mapping) and status.get("name") == container:
            return status
    return None


def _validator_status(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return _container_status(pod, "validator")


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class RanImage:
    image: str  # the reference the kubelet reports (``status.image``), else the pod spec's
    digest: str  # ``sha256:<64 hex>`` from ``status.imageID``; "" = not reported


def ran_image(pod: Mapping[str, Any] | None, container: str) -> RanImage:
    """The image ``container`` of ``pod`` ran and its repository digest, as the kubelet reports
    them; a container that never started has an image but no digest."""
    if pod is None:
        return RanImage("", "")
    status = _container_status(pod, container) or {}
    image = status.get("image")
    # The cluster writes the status: text with control characters (NUL, newlines) names no
    # image, so the reference the pod spec asked for is named instead.
    if not isinstance(image, str) or not image or _CONTROL.search(image):
        spec = (pod.get("spec") or {}).get("containers") or ()
        named = [c for c in spec if isinstance(c, Mapping) and c.get("name") == container]
        image = named[0].get("image") if named else ""
        image = image if isinstance(image, str) else ""
    return RanImage(image[:512], repo_digest(status.get("imageID")))


def _terminated(term: Mapping[str, Any]) -> Verdict:
    try:
        code = int(term.get("exitCode", -1))
    except (TypeError, ValueError):
        code = -1
    message = cap_message(str(term.get("message") or "").encode("utf-8", "surrogatepass"))
    if term.get("reason") == "OOMKilled":
        message = "Container OOMKilled"
    started, finished = parse_time(term.get("startedAt")), parse_time(term.get("finishedAt"))
    duration = 0
    if started is not None and finished is not None and finished >= started:
        duration = int((finished - started) * 1000)  # second granularity, as the API reports
    return Verdict(code, message, duration, read_logs=True)


def from_pod(
    pod: Mapping[str, Any] | None, job: Mapping[str, Any], *, job_name: str, deadline_s: int
) -> Verdict:
    """ExtractResult after the Job is terminal."""
    if pod is None:
        cond = failed_condition(job)
        selector = f"batch.kubernetes.io/job-name={job_name}"
        if cond is not None and cond.get("reason") == "DeadlineExceeded":
            deadline = go_duration(
                (job.get("spec") or {}).get("activeDeadlineSeconds") or deadline_s
            )
            return Verdict(
                1,
                f"validator Job did not complete within its {deadline} deadline; no pod remains "
                "for it, so its logs are unavailable (Job condition Failed/DeadlineExceeded: "
                f"{cond.get('message', '')})",
            )
        if cond is not None:
            return Verdict(
                -1,
                f"Job {job_name} failed ({cond.get('reason', '')}): {cond.get('message', '')}; "
                f"pod not found: no pods match {selector}",
            )
        return Verdict(-1, f"pod not found for Job {job_name}: no pods match {selector}")
    status = _validator_status(pod)
    if status is None:
        return Verdict(-1, 'container "validator" not found (validator package contract)', 0, True)
    state = status.get("state") or {}
    if state.get("terminated") is not None:
        return _terminated(state["terminated"])
    if state.get("waiting") is not None:  # never started (image pull): no logs
        waiting = state["waiting"]
        return Verdict(-1, f"{waiting.get('reason', '')}: {waiting.get('message', '')}")
    return Verdict(-1, "container still running after wait completed", 0, True)


def after_timeout(pod: Mapping[str, Any] | None, fallback: str) -> Verdict:
    """HandleTimeout: the real result if the container terminated, else ``fallback``."""
    if pod is None:
        return Verdict(-1, "pod never reached running state")
    term = ((_validator_status(pod) or {}).get("state") or {}).get("terminated")
    if term:
        return _terminated(term)
    return Verdict(-1, fallback, 0, read_logs=True)


def outcome(
    phase: str,
    check: str,
    job_name: str,
    verdict: Verdict,
    logs: bytes,
    ran: RanImage | None = None,
) -> CheckOutcome:
    stdout, extra = process_logs(logs)
    ran = ran or RanImage("", "")
    return CheckOutcome(
        phase=phase,
        name=check,
        status=exit_code_status(verdict.exit_code),
        exit_code=verdict.exit_code,
        message=verdict.message,
        duration_ms=verdict.duration_ms,
        stdout=stdout,
        extra=extra,
        job_name=job_name,
        image=ran.image,
        image_digest=ran.digest,
    )
