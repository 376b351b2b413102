"""Migration 0008 turns each upload log's stored HTTP status into its outcome, and back."""

from __future__ import annotations

import pytest

from evidence_app.models import UploadLog
from tests.migration_steps import migrate_to

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("evidence_app", "0007_evidence_live_latest_index")]
STATUSES = [201, 200, 422, 413, 503, None]  # None: an OCI upload still pending
OUTCOMES = ["created", "existing", "refused", "too_large", "busy", ""]


def test_it_keeps_what_each_upload_came_to_both_ways() -> None:
    try:
        old_log = migrate_to(BEFORE).get_model("evidence_app", "UploadLog")
        pks = [old_log.objects.create(channel="api", http_status=s).pk for s in STATUSES]
        migrate_to()
        migrated = dict(UploadLog.objects.values_list("pk", "outcome"))
        assert [migrated[pk] for pk in pks] == OUTCOMES

        reverted = migrate_to(BEFORE).get_model("evidence_app", "UploadLog")
        statuses = dict(reverted.objects.values_list("pk", "http_status"))
        assert [statuses[pk] for pk in pks] == STATUSES
    finally:
        migrate_to()
