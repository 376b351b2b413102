"""``POST /api/v1/check/``: does the counted evidence cover the cluster this snapshot describes?

For automation: a CI job posts its cluster's snapshot (multipart file ``snapshot`` or JSON
``{"snapshot": "<yaml>"}``) plus any criteria a snapshot cannot tell, and fails when
``covered`` is false. The snapshot is not stored. Bad input is a 400 whose ``detail`` names
the problem; a body over the size cap is a 413 before it is read.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import RequestDataTooBig
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.parsers import MultiPartParser
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from aicr_site.parsers import BoundedJSONParser
from evidence_app.api.serializers import ErrorSerializer
from evidence_app.auth import BearerTokenAuthentication
from evidence_app.coverage.service import CheckInputError, check_snapshot
from evidence_app.coverage.snapshot_input import MAX_SNAPSHOT_BYTES
from evidence_app.verification._json import JSONLimits

TAGS = ["check"]
MAX_BODY_BYTES = MAX_SNAPSHOT_BYTES + 64 * 1024
CRITERIA = ("service", "accelerator", "os", "intent", "platform")
# {"snapshot": "<yaml>", criteria..., "profile": ...}: one flat object of text fields.
_BODY_LIMITS = JSONLimits(max_bytes=MAX_BODY_BYTES, max_depth=2, max_object_keys=16)


class _Criteria(serializers.Serializer):
    service = serializers.CharField(required=False, allow_blank=True, max_length=100)
    accelerator = serializers.CharField(required=False, allow_blank=True, max_length=100)
    os = serializers.CharField(required=False, allow_blank=True, max_length=100)
    intent = serializers.CharField(required=False, allow_blank=True, max_length=100)
    platform = serializers.CharField(required=False, allow_blank=True, max_length=100)
    profile = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=200,
        help_text="A profile selection (`gpuStack=operator-managed`); default: its default.",
    )


class CheckJSONInputSerializer(_Criteria):
    snapshot = serializers.CharField(
        help_text="The snapshot YAML text (aicr snapshot output).", trim_whitespace=False
    )


class CheckFileInputSerializer(_Criteria):
    snapshot = serializers.FileField(help_text="The snapshot YAML file.")


class CheckConstraintSerializer(serializers.Serializer):
    name = serializers.CharField()
    expected = serializers.CharField()
    actual = serializers.CharField()
    ok = serializers.BooleanField()
    message = serializers.CharField()


class IdentityChangeSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="`identity-changed` (a staleness reason's code).")
    detail = serializers.CharField(help_text="'<identity> changed from <evidence> to <yours>'.")


class CheckEvidenceSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    signer = serializers.CharField()
    attestedAt = serializers.DateTimeField()
    aicrVersion = serializers.CharField()
    sameRecipe = serializers.BooleanField(
        help_text="The evidence names the current catalog's digest of this recipe."
    )
    exact = serializers.BooleanField(help_text="Every identity recorded on both sides, equal.")
    matches = serializers.ListField(child=serializers.CharField())
    differs = serializers.ListField(child=serializers.CharField())
    notRecorded = serializers.ListField(
        child=serializers.CharField(),
        help_text="In the snapshot, not in the evidence, and not for its redaction.",
    )
    redacted = serializers.ListField(
        child=serializers.CharField(),
        help_text="In the snapshot; removed from the evidence by AICR's redaction policy (its "
        "redaction block says so): publishing with --full would settle them.",
    )
    matchesAsRecorded = serializers.BooleanField(
        help_text="Same recipe, every identity the evidence records matches, and the only gaps "
        "are redacted ones."
    )
    notInSnapshot = serializers.ListField(
        child=serializers.CharField(), help_text="In the evidence but not in the snapshot."
    )
    values = serializers.DictField(
        help_text="Per differing identity: {snapshot, evidence} (the two values)."
    )
    reasons = IdentityChangeSerializer(
        many=True,
        help_text="Each change between the evidence and the snapshot, named: "
        "`identity-changed`, '<identity> changed from <the evidence's> to <the snapshot's>' "
        "(the plan first when the evidence was made for another digest of the recipe).",
    )


class CheckOutputSerializer(serializers.Serializer):
    recipe = serializers.CharField(allow_null=True, help_text="Null when no recipe applies.")
    criteria = serializers.DictField(child=serializers.CharField())
    criteriaOrigin = serializers.DictField(
        child=serializers.ChoiceField(choices=["snapshot", "stated"])
    )
    resolutionError = serializers.CharField(help_text="Why no recipe applies (AICR's message).")
    validCompletions = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField())
    )
    excludedOverlays = serializers.ListField(child=serializers.DictField())
    constraintWarnings = serializers.ListField(child=serializers.DictField())
    constraints = CheckConstraintSerializer(many=True)
    identity = serializers.DictField(
        child=serializers.CharField(allow_null=True),
        help_text="The snapshot's identities (null: not in the snapshot).",
    )
    evidence = CheckEvidenceSerializer(many=True)
    verdict = serializers.CharField()
    covered = serializers.BooleanField(
        help_text="Counted evidence ran on this tuple (every identity it records matches, the "
        "only gaps redacted by AICR's policy) and the readiness constraints pass."
    )
    settle = serializers.ListField(
        child=serializers.CharField(),
        help_text="What would settle each identity the evidence cannot confirm (redacted: "
        "publish with --full; not recorded; not in the snapshot).",
    )


def _bad(detail: str, status: int = 400) -> Response:
    return Response({"detail": detail}, status=status)


class SnapshotCheckView(APIView):
    """Match a snapshot against the catalog and the counted evidence."""

    authentication_classes = [BearerTokenAuthentication]
    permission_classes = [AllowAny]
    parser_classes = [MultiPartParser, BoundedJSONParser]
    json_limits = _BODY_LIMITS

    @extend_schema(
        summary="Does the evidence cover my cluster?",
        description=(
            "Derives the criteria from the snapshot as `aicr recipe --snapshot` does "
            "(service/accelerator/os; state intent and platform), resolves the recipe, "
            "evaluates its readiness constraints, and compares the snapshot's identities with "
            "every counted evidence of that recipe. The snapshot is not stored. "
            f"At most {MAX_SNAPSHOT_BYTES} bytes."
        ),
        request={
            "multipart/form-data": CheckFileInputSerializer,
            "application/json": CheckJSONInputSerializer,
        },
        responses={
            200: CheckOutputSerializer,
            400: ErrorSerializer,
            413: OpenApiResponse(ErrorSerializer, description="The body is over the size cap."),
        },
        examples=[
            OpenApiExample(
                "Bad snapshot",
                value={"detail": "measurements[0].type 'Bogus' is not an AICR measurement type"},
                response_only=True,
                status_codes=["400"],
            )
        ],
        tags=TAGS,
    )
    def post(self, request: Request) -> Response:
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > MAX_BODY_BYTES:
            return _bad(
                f"the request is {length} bytes; a snapshot may be at most {MAX_SNAPSHOT_BYTES}",
                413,
            )
        try:
            data: Any = request.data
        except RequestDataTooBig:
            return _bad(f"the snapshot is larger than {MAX_SNAPSHOT_BYTES} bytes", 413)
        upload = request.FILES.get("snapshot")
        serializer = (CheckFileInputSerializer if upload is not None else CheckJSONInputSerializer)(
            data=data
        )
        if not serializer.is_valid():
            field, errors = next(iter(serializer.errors.items()))
            return _bad(f"{field}: {' '.join(str(e) for e in errors)}")
        raw = serializer.validated_data["snapshot"]
        if upload is not None:
            raw = upload.read(MAX_SNAPSHOT_BYTES + 1)
        criteria = {k: serializer.validated_data.get(k, "") for k in CRITERIA}
        try:
            result = check_snapshot(
                raw, criteria, profile=serializer.validated_data.get("profile") or None
            )
        except CheckInputError as exc:
            return _bad(str(exc))
        return Response(result.as_api(), headers={"Cache-Control": "no-store"})
