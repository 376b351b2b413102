"""``UploadLog.http_status`` becomes ``UploadLog.outcome``: the service records what happened in
the domain's words and the views choose the HTTP status. Every stored status maps to exactly one
outcome (and back), so no row loses what it said.

``http_status`` itself stays (nullable, no longer written): processes still running the previous
release write it until they restart. A migration of the next release drops it, once no deployed
code names it."""

from typing import Any

from django.db import migrations, models

OUTCOME_OF_STATUS = {
    201: "created",
    200: "existing",
    422: "refused",
    413: "too_large",
    503: "busy",
}


def outcome_from_status(apps: Any, schema_editor: Any) -> None:
    upload_log = apps.get_model("evidence_app", "UploadLog")
    for status, outcome in OUTCOME_OF_STATUS.items():
        upload_log.objects.filter(http_status=status).update(outcome=outcome)


def status_from_outcome(apps: Any, schema_editor: Any) -> None:
    upload_log = apps.get_model("evidence_app", "UploadLog")
    for status, outcome in OUTCOME_OF_STATUS.items():
        upload_log.objects.filter(outcome=outcome).update(http_status=status)


class Migration(migrations.Migration):
    dependencies = [("evidence_app", "0007_evidence_live_latest_index")]

    operations = [
        migrations.AddField(
            model_name="uploadlog",
            name="outcome",
            field=models.CharField(
                blank=True,
                choices=[
                    ("created", "Stored: a new record"),
                    ("existing", "Already known: answered with the stored record"),
                    ("refused", "Refused: not verified evidence"),
                    ("too_large", "Refused: over the size limit"),
                    ("busy", "Not decided: the database could not take it; retry"),
                ],
                help_text="Blank while an OCI upload waits for its worker.",
                max_length=10,
            ),
        ),
        migrations.RunPython(outcome_from_status, status_from_outcome, elidable=True),
    ]
