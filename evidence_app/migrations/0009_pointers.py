"""AICR evidence pointers: one row per pointer file of an imported tree (services.pointers)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("evidence_app", "0008_uploadlog_outcome"),
    ]

    operations = [
        migrations.CreateModel(
            name="EvidencePointer",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "path",
                    models.CharField(
                        help_text="recipes/evidence/… inside the AICR tree.",
                        max_length=1000,
                        unique=True,
                    ),
                ),
                (
                    "content_sha256",
                    models.CharField(help_text="sha256 of the file as imported.", max_length=64),
                ),
                (
                    "allowlist_sha256",
                    models.CharField(
                        blank=True,
                        help_text="sha256 of the tree allowlist it was checked against.",
                        max_length=64,
                    ),
                ),
                ("recipe", models.CharField(blank=True, db_index=True, max_length=200)),
                ("profile", models.CharField(blank=True, max_length=200)),
                ("signer_identity", models.CharField(blank=True, max_length=4000)),
                ("signer_issuer", models.CharField(blank=True, max_length=1000)),
                ("rekor_log_index", models.BigIntegerField(blank=True, null=True)),
                (
                    "source",
                    models.CharField(
                        blank=True, help_text="Slug of the claimed signer.", max_length=32
                    ),
                ),
                (
                    "claimed_class",
                    models.CharField(
                        blank=True,
                        help_text="The signer's class in the tree's allowlist.",
                        max_length=20,
                    ),
                ),
                ("predicate_type", models.CharField(blank=True, max_length=200)),
                (
                    "oci",
                    models.CharField(
                        blank=True, help_text="bundle.oci as written.", max_length=500
                    ),
                ),
                ("bundle_digest", models.CharField(blank=True, max_length=71)),
                ("attested_at", models.DateTimeField(blank=True, null=True)),
                (
                    "state",
                    models.CharField(
                        choices=[
                            ("pending", "Pending: not pulled and verified yet (never counted)"),
                            ("ingested", "Ingested: its bundle was pulled, verified and linked"),
                            (
                                "refused",
                                "Refused: breaks the pointer contract or its bundle failed",
                            ),
                        ],
                        default="pending",
                        max_length=10,
                    ),
                ),
                ("reason", models.CharField(blank=True, max_length=1000)),
                ("tries", models.PositiveIntegerField(default=0)),
                ("last_tried", models.DateTimeField(blank=True, null=True)),
                ("next_try", models.DateTimeField(blank=True, null=True)),
                ("tree_commit", models.CharField(blank=True, max_length=40)),
                ("first_seen", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                (
                    "evidence",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="pointers",
                        to="evidence_app.evidence",
                    ),
                ),
                (
                    "upload",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        to="evidence_app.uploadlog",
                    ),
                ),
            ],
            options={
                "ordering": ["recipe", "path"],
                "indexes": [
                    models.Index(fields=["state", "next_try"], name="evidence_ap_state_cde15f_idx")
                ],
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(
                            models.Q(("state", "ingested"), _negated=True),
                            ("evidence__isnull", False),
                            _connector="OR",
                        ),
                        name="evidence_pointer_ingested_has_evidence",
                    )
                ],
            },
        ),
    ]
