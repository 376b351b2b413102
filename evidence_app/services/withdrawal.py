"""Withdrawing evidence: it stays visible (marked withdrawn, with who, when and why) and stops
counting (``EvidenceQuerySet.counted`` excludes withdrawn rows).

Who may: a maintainer, or a contributor for evidence they uploaded. A reason is required.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from evidence_app import permissions
from evidence_app.consensus import stored
from evidence_app.exports.artefact import publication_changed
from evidence_app.models import Evidence

MAX_REASON = 1000


class WithdrawalError(Exception):
    """Why a withdrawal was refused; ``code`` is ``reason-required``, ``forbidden`` or
    ``already-withdrawn``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@transaction.atomic
def evidence_withdraw(*, evidence: Evidence, by: Any, roles: set[str], reason: str) -> Evidence:
    """Withdraw ``evidence`` on behalf of ``by`` acting with ``roles``."""
    reason = " ".join((reason or "").split())
    if not reason:
        raise WithdrawalError("reason-required", "A reason is required to withdraw evidence.")
    if len(reason) > MAX_REASON:
        raise WithdrawalError(
            "reason-required", f"The reason is longer than {MAX_REASON} characters."
        )
    if not permissions.can_withdraw(by, evidence, roles=roles):
        raise WithdrawalError(
            "forbidden",
            "Only a maintainer, or the contributor who uploaded it, may withdraw this evidence.",
        )
    # Race: two withdrawals at once (or a withdrawal and a re-upload answering "already known")
    # must record one withdrawal; lock the row and re-check.
    locked = Evidence.objects.select_for_update().only("pk", "withdrawn_at").get(pk=evidence.pk)
    if locked.withdrawn_at is not None:
        raise WithdrawalError("already-withdrawn", "This evidence is already withdrawn.")
    now = timezone.now()
    Evidence.objects.filter(pk=evidence.pk).update(
        withdrawn_at=now, withdrawn_by=by, withdrawal_reason=reason
    )
    evidence.withdrawn_at = now
    evidence.withdrawn_by = by
    evidence.withdrawal_reason = reason
    stored.evidence_withdrawn(evidence)
    publication_changed()
    return evidence
