"""Every branch of AICR's ExtractResult / HandleTimeout (AICR-VALIDATE.md §6.3-§6.5), on JSON."""

from __future__ import annotations

from typing import Any

from validators_app.orchestrator.extract import (
    Verdict,
    after_timeout,
    from_pod,
    is_terminal,
    outcome,
    pick_pod,
)

JOB = "aicr-operator-health-1a2b3c4d"


def _pod(
    state: dict[str, Any] | None,
    *,
    phase: str = "Failed",
    created: str = "2026-08-19T10:15:00Z",
    name: str = "p",
    deleting: bool = False,
) -> dict[str, Any]:
    statuses = [{"name": "sidecar", "state": {"running": {}}}]
    if state is not None:
        statuses.append({"name": "validator", "state": state})
    metadata: dict[str, Any] = {"name": name, "creationTimestamp": created}
    if deleting:
        metadata["deletionTimestamp"] = "2026-08-19T10:16:00Z"
    return {"metadata": metadata, "status": {"phase": phase, "containerStatuses": statuses}}


def _job(reason: str | None = None, message: str = "", deadline: int = 120) -> dict[str, Any]:
    conditions = (
        [{"type": "Failed", "status": "True", "reason": reason, "message": message}]
        if reason
        else []
    )
    return {"spec": {"activeDeadlineSeconds": deadline}, "status": {"conditions": conditions}}


def _from(pod: dict[str, Any] | None, job: dict[str, Any] | None = None) -> Verdict:
    return from_pod(pod, job or _job(), job_name=JOB, deadline_s=120)


def test_terminated_gives_exit_code_message_and_whole_second_duration() -> None:
    term = {
        "exitCode": 2,
        "message": "[INTERNAL] no constraint: skip",
        "startedAt": "2026-08-19T10:15:02Z",
        "finishedAt": "2026-08-19T10:15:05Z",
    }
    assert _from(_pod({"terminated": term})) == Verdict(
        2, "[INTERNAL] no constraint: skip", 3000, True
    )


def test_oom_replaces_the_message_and_odd_exit_codes_are_other() -> None:
    verdict = _from(_pod({"terminated": {"exitCode": 137, "reason": "OOMKilled", "message": "x"}}))
    assert (verdict.exit_code, verdict.message) == (137, "Container OOMKilled")
    assert outcome("deployment", "x", JOB, verdict, b"").status == "other"
    assert _from(_pod({"terminated": {"exitCode": "garbage"}})).exit_code == -1


def test_a_long_termination_message_is_capped() -> None:
    verdict = _from(_pod({"terminated": {"exitCode": 1, "message": "é" * 3000}}))
    assert verdict.message.endswith("... [truncated 1904 bytes]")
    assert verdict.message.startswith("é" * 2048)


def test_waiting_running_and_missing_container() -> None:
    waiting = {"waiting": {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "x"'}}
    assert _from(_pod(waiting)) == Verdict(-1, 'ImagePullBackOff: Back-off pulling image "x"')
    assert _from(_pod({"running": {}})) == Verdict(
        -1, "container still running after wait completed", 0, True
    )
    assert _from(_pod(None)) == Verdict(
        -1, 'container "validator" not found (validator package contract)', 0, True
    )


def test_no_pod_branches() -> None:
    deadline = _from(
        None, _job("DeadlineExceeded", "Job was active longer than specified deadline", 480)
    )
    assert deadline == Verdict(
        1,
        "validator Job did not complete within its 8m0s deadline; no pod remains for it, so its "
        "logs are unavailable (Job condition Failed/DeadlineExceeded: Job was active longer than "
        "specified deadline)",
    )
    evicted = _from(None, _job("PodFailurePolicy", "node lost"))
    assert evicted.exit_code == -1
    assert evicted.message.startswith(
        f"Job {JOB} failed (PodFailurePolicy): node lost; pod not found"
    )
    assert _from(None).message.startswith(f"pod not found for Job {JOB}")


def test_pod_choice_skips_terminating_and_prefers_newest_non_failed() -> None:
    old_ok = _pod(None, phase="Succeeded", created="2026-08-19T10:00:00Z", name="old-ok")
    new_failed = _pod(None, phase="Failed", created="2026-08-19T11:00:00Z", name="new-failed")
    newest_deleting = _pod(
        None, phase="Running", created="2026-08-19T12:00:00Z", name="del", deleting=True
    )
    assert pick_pod([new_failed, old_ok, newest_deleting])["metadata"]["name"] == "old-ok"  # type: ignore[index]
    older_failed = _pod(None, created="2026-08-19T09:00:00Z", name="older-failed")
    assert pick_pod([older_failed, new_failed])["metadata"]["name"] == "new-failed"  # type: ignore[index]
    assert pick_pod([newest_deleting]) is None


def test_after_timeout() -> None:
    assert after_timeout(None, "t") == Verdict(-1, "pod never reached running state")
    assert after_timeout(_pod({"running": {}}), "timeout: x") == Verdict(-1, "timeout: x", 0, True)
    assert after_timeout(_pod({"terminated": {"exitCode": 0}}), "t").exit_code == 0


def test_terminal_conditions() -> None:
    assert is_terminal({"status": {"conditions": [{"type": "Complete", "status": "True"}]}})
    assert is_terminal(_job("BackoffLimitExceeded"))
    assert not is_terminal({"status": {"conditions": [{"type": "Failed", "status": "False"}]}})
    assert not is_terminal(
        {"status": {"conditions": [{"type": "SuccessCriteriaMet", "status": "True"}]}}
    )
    assert not is_terminal(None)
