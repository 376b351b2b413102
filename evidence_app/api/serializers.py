"""Serializers of the evidence API (output shapes documented for drf-spectacular)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.reverse import reverse

from evidence_app import consensus
from evidence_app.evidence_page import verified_and_claimed
from evidence_app.models import Evidence, Signer, SignerClassChange, UploadLog, Verdict
from evidence_app.services.staleness import CODES as STALE_CODES
from evidence_app.services.staleness import StaleReason
from evidence_app.upload_status import http_status_of


class TranscriptStepSerializer(serializers.Serializer):
    step = serializers.CharField()
    ok = serializers.BooleanField()
    detail = serializers.CharField()


class StaleReasonSerializer(serializers.Serializer):
    code = serializers.ChoiceField(choices=list(STALE_CODES))
    detail = serializers.CharField()


class VerifyCommandSerializer(serializers.Serializer):
    tool = serializers.CharField()
    text = serializers.CharField(help_text="A shell command line, every argument quoted.")
    note = serializers.CharField(allow_blank=True)


class SignerSummarySerializer(serializers.ModelSerializer):
    signer_class = serializers.CharField(
        help_text="first-party, partner, community, registered-key or reported."
    )
    url = serializers.SerializerMethodField()

    class Meta:
        model = Signer
        fields = ["slug", "label", "kind", "signer_class", "counted", "identity", "issuer", "url"]

    @extend_schema_field(OpenApiTypes.URI)
    def get_url(self, obj: Signer) -> str:
        return reverse("api:signer-detail", args=[obj.slug], request=self.context.get("request"))


class FieldProvenanceSerializer(serializers.Serializer):
    field = serializers.CharField()
    value = serializers.CharField()
    how = serializers.CharField(allow_blank=True, help_text="How it was checked (verified).")


class VerifiedFieldsSerializer(serializers.Serializer):
    """What this site verified (a value it could not establish, e.g. a missing Rekor entry or
    signed timestamp, is absent) and what the signer only claims."""

    verified = FieldProvenanceSerializer(many=True)
    claimed = FieldProvenanceSerializer(many=True)


class EvidenceListSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()
    recipe = serializers.CharField(source="recipe_name")
    recipe_digest = serializers.CharField(source="subject_digest")
    catalog = serializers.IntegerField(source="recipe.catalog_id")
    signer = SignerSummarySerializer()
    counted = serializers.SerializerMethodField()
    withdrawn = serializers.SerializerMethodField()
    stale = serializers.SerializerMethodField()
    stale_reasons = serializers.SerializerMethodField()

    class Meta:
        model = Evidence
        fields = [
            "id",
            "url",
            "sha256",
            "recipe",
            "recipe_digest",
            "catalog",
            "signer",
            "verdict",
            "counted",
            "predicate_type",
            "aicr_version",
            "validator_catalog_version",
            "k8s_version",
            "attested_at",
            "uploaded_at",
            "container",
            "is_demo",
            "is_simulated",
            "withdrawn",
            "stale",
            "stale_reasons",
        ]

    def _reasons(self, obj: Evidence) -> list[StaleReason]:
        reasons: list[StaleReason] = self.context.get("staleness", {}).get(obj.pk, [])
        return reasons

    @extend_schema_field(OpenApiTypes.URI)
    def get_url(self, obj: Evidence) -> str:
        return reverse("api:evidence-detail", args=[obj.pk], request=self.context.get("request"))

    @extend_schema_field(
        serializers.BooleanField(
            help_text="Consensus counts it: verified, not withdrawn, a counted signer, not "
            "simulated, made with an AICR version in the site's supported range (else the "
            "stale reason `aicr-unsupported` says so; demo evidence counts and says so in "
            "`is_demo`)."
        )
    )
    def get_counted(self, obj: Evidence) -> bool:
        return consensus.is_counted(obj)

    def get_withdrawn(self, obj: Evidence) -> bool:
        return obj.withdrawn_at is not None

    def get_stale(self, obj: Evidence) -> bool:
        return bool(self._reasons(obj))

    @extend_schema_field(StaleReasonSerializer(many=True))
    def get_stale_reasons(self, obj: Evidence) -> list[dict[str, str]]:
        return [r.as_dict() for r in self._reasons(obj)]


class EvidenceDetailSerializer(EvidenceListSerializer):
    transcript = TranscriptStepSerializer(many=True)
    certificate = serializers.JSONField(
        help_text="Verified signer claims: keyless (identity, issuer, Fulcio claims, "
        "certificate, trusted root, Rekor entry) or key (fingerprint, algorithm)."
    )
    predicate_summary = serializers.SerializerMethodField()
    check_results = serializers.JSONField(
        help_text="{phase: {check: {status, raw_status, duration_ms, message, metrics, "
        "thresholds}}} from the CTRF reports (evidence directories only)."
    )
    verify_commands = VerifyCommandSerializer(many=True)
    withdrawal = serializers.SerializerMethodField()
    bundle_url = serializers.SerializerMethodField()
    recipe_url = serializers.SerializerMethodField()
    verified_fields = serializers.SerializerMethodField()

    class Meta(EvidenceListSerializer.Meta):
        fields = [
            *EvidenceListSerializer.Meta.fields,
            "size",
            "media_type",
            "oci_ref",
            "transcript",
            "certificate",
            "rekor_log_index",
            "integrated_time",
            "trusted_root_name",
            "predicate_summary",
            "check_results",
            "verify_commands",
            "verified_fields",
            "withdrawal",
            "bundle_url",
            "recipe_url",
        ]

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_predicate_summary(self, obj: Evidence) -> dict[str, Any]:
        predicate: Mapping[str, object] = obj.predicate
        keys = (
            "schemaVersion",
            "attestedAt",
            "aicrVersion",
            "validatorCatalogVersion",
            "validatorImages",
            "fingerprint",
            "criteriaMatch",
            "phases",
            "bom",
            "manifest",
            "redaction",
            "profile",
        )
        return {key: predicate[key] for key in keys if key in predicate}

    @extend_schema_field(
        {
            "type": "object",
            "nullable": True,
            "properties": {
                "at": {"type": "string", "format": "date-time"},
                "by": {"type": "string", "nullable": True},
                "reason": {"type": "string"},
            },
        }
    )
    def get_withdrawal(self, obj: Evidence) -> dict[str, Any] | None:
        if obj.withdrawn_at is None:
            return None
        by = obj.withdrawn_by.get_username() if obj.withdrawn_by else None
        return {"at": obj.withdrawn_at, "by": by, "reason": obj.withdrawal_reason}

    @extend_schema_field(OpenApiTypes.URI)
    def get_bundle_url(self, obj: Evidence) -> str:
        return reverse("api:evidence-bundle", args=[obj.pk], request=self.context.get("request"))

    @extend_schema_field(OpenApiTypes.URI)
    def get_recipe_url(self, obj: Evidence) -> str:
        url = reverse(
            "api:recipe-detail", args=[obj.recipe_name], request=self.context.get("request")
        )
        return f"{url}?catalog={obj.recipe.catalog_id}"

    @extend_schema_field(VerifiedFieldsSerializer)
    def get_verified_fields(self, obj: Evidence) -> dict[str, list[dict[str, str]]]:
        """Which values this site verified and which the signer merely wrote: the evidence
        page's lists (``evidence_page.verified_and_claimed``)."""
        verified, claimed = verified_and_claimed(obj)
        return {
            "verified": [item.as_dict() for item in verified],
            "claimed": [item.as_dict() for item in claimed],
        }


class EvidenceUploadSerializer(serializers.Serializer):
    """Multipart: ``bundle`` (+ optional ``artifact``); or JSON ``{"oci_ref": …}``."""

    bundle = serializers.FileField(
        required=False,
        help_text="A Sigstore bundle (JSON v0.1-v0.3) or an AICR evidence directory as "
        "tar / tar.gz.",
    )
    artifact = serializers.FileField(
        required=False, help_text="The file the bundle signs (e.g. recipe.yaml), optional."
    )
    oci_ref = serializers.CharField(
        required=False,
        max_length=500,
        help_text="registry/repository@sha256:<manifest digest> (tags are refused).",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if bool(attrs.get("bundle")) == bool(attrs.get("oci_ref")):
            raise serializers.ValidationError(
                'Send exactly one of: a multipart file field `bundle`, or JSON {"oci_ref": …}.'
            )
        if attrs.get("artifact") and not attrs.get("bundle"):
            raise serializers.ValidationError("`artifact` goes with a `bundle` upload.")
        return attrs


class IngestResultSerializer(serializers.Serializer):
    id = serializers.IntegerField(allow_null=True, help_text="The evidence id (when verified).")
    url = serializers.URLField(allow_null=True)
    upload_id = serializers.IntegerField()
    verdict = serializers.ChoiceField(choices=Verdict.choices)
    failed_step = serializers.CharField(allow_blank=True)
    created = serializers.BooleanField(help_text="True: a new record; false: known or refused.")
    withdrawn = serializers.BooleanField(
        help_text="The (existing) record is withdrawn: it stays withdrawn and is not counted."
    )
    signer = serializers.DictField(help_text="identity, issuer, class, counted, slug, label")
    transcript = TranscriptStepSerializer(many=True)
    reason = serializers.CharField(allow_blank=True)


class OciAcceptedSerializer(serializers.Serializer):
    upload_id = serializers.IntegerField()
    state = serializers.CharField()
    status_url = serializers.URLField()


class UploadStatusSerializer(serializers.ModelSerializer):
    state = serializers.CharField(help_text="pending, running or done.")
    evidence_id = serializers.IntegerField(allow_null=True)
    evidence_url = serializers.SerializerMethodField()
    http_status = serializers.SerializerMethodField(
        help_text="The HTTP status the upload was answered with (from `outcome`); null while "
        "pending."
    )
    transcript = TranscriptStepSerializer(many=True)
    signer = serializers.DictField()

    class Meta:
        model = UploadLog
        fields = [
            "id",
            "state",
            "channel",
            "oci_ref",
            "filename",
            "sha256",
            "size",
            "verdict",
            "failed_step",
            "reason",
            "transcript",
            "signer",
            "created",
            "outcome",
            "http_status",
            "evidence_id",
            "evidence_url",
            "at",
            "completed_at",
        ]

    def get_http_status(self, obj: UploadLog) -> int | None:
        return http_status_of(obj.outcome) if obj.outcome else None

    @extend_schema_field(OpenApiTypes.URI)
    def get_evidence_url(self, obj: UploadLog) -> str | None:
        if obj.evidence_id is None:
            return None
        return reverse(
            "api:evidence-detail", args=[obj.evidence_id], request=self.context.get("request")
        )


class WithdrawInputSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=1000, help_text="Why (required; shown publicly).")


class ClassChangeSerializer(serializers.ModelSerializer):
    allowlist = serializers.IntegerField(source="allowlist_id", allow_null=True)

    class Meta:
        model = SignerClassChange
        fields = [
            "at",
            "from_class",
            "to_class",
            "from_counted",
            "to_counted",
            "allowlist",
            "reason",
        ]


class SignerListSerializer(SignerSummarySerializer):
    evidence_count = serializers.IntegerField()

    class Meta(SignerSummarySerializer.Meta):
        fields = [*SignerSummarySerializer.Meta.fields, "first_seen", "evidence_count"]


class SignerDetailSerializer(SignerListSerializer):
    class_history = ClassChangeSerializer(source="class_changes", many=True)
    key_fingerprint = serializers.CharField(source="key.fingerprint", allow_null=True, default=None)
    evidence_url = serializers.SerializerMethodField()

    class Meta(SignerListSerializer.Meta):
        fields = [
            *SignerListSerializer.Meta.fields,
            "key_fingerprint",
            "class_history",
            "evidence_url",
        ]

    @extend_schema_field(OpenApiTypes.URI)
    def get_evidence_url(self, obj: Signer) -> str:
        url = reverse("api:evidence-list", request=self.context.get("request"))
        return f"{url}?signer={obj.slug}"


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()
