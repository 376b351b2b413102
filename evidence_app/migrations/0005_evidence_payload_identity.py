"""Evidence identity is the signed statement and its signer, not the upload's bytes.

Adds ``Evidence.payload_sha256`` (sha256 of the DSSE payload), fills it from the stored bytes,
and makes ``(signer, payload_sha256)`` unique. Records that are the same statement by the same
signer as an earlier record (re-wrapped uploads stored before this migration) keep no identity
and are withdrawn, naming the record they duplicate: consensus counts each statement once, and a
withdrawal of the earliest record is no longer undone by its copies.
"""

import hashlib

from django.db import migrations, models
from django.utils import timezone

from evidence_app.verification.pipeline import signed_payload

DUPLICATE_REASON = (
    "duplicate of evidence #{pk}: the same signed statement by the same signer "
    "(withdrawn by migration 0005, one record per statement)"
)


def fill_identity(apps, schema_editor):
    Evidence = apps.get_model("evidence_app", "Evidence")
    first: dict[tuple[int, str], int] = {}
    rows = Evidence.objects.order_by("pk").only("pk", "signer_id", "content")
    for row in rows.iterator(chunk_size=200):
        payload = signed_payload(bytes(row.content))
        if payload is None:
            continue  # cannot happen for verified evidence; left without an identity
        digest = hashlib.sha256(payload).hexdigest()
        key = (row.signer_id, digest)
        if key not in first:
            first[key] = row.pk
            Evidence.objects.filter(pk=row.pk).update(payload_sha256=digest)
            continue
        duplicate = Evidence.objects.filter(pk=row.pk)
        duplicate.filter(withdrawn_at__isnull=True).update(
            withdrawn_at=timezone.now(), withdrawal_reason=DUPLICATE_REASON.format(pk=first[key])
        )


class Migration(migrations.Migration):
    dependencies = [("evidence_app", "0004_evidence_withdrawn_index")]

    operations = [
        migrations.AddField(
            model_name="evidence",
            name="payload_sha256",
            field=models.CharField(
                blank=True,
                default="",
                help_text=(
                    "sha256 of the signed DSSE payload (the in-toto statement bytes); with the "
                    "signer, the identity of this evidence. Empty only for a duplicate withdrawn "
                    "by migration 0005."
                ),
                max_length=64,
            ),
        ),
        migrations.RunPython(fill_identity, migrations.RunPython.noop, elidable=False),
        migrations.AddConstraint(
            model_name="evidence",
            constraint=models.UniqueConstraint(
                condition=models.Q(("payload_sha256", ""), _negated=True),
                fields=("signer", "payload_sha256"),
                name="evidence_one_per_statement_signer",
            ),
        ),
    ]
