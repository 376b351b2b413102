"""Registered public keys API: register (maintainers), list (maintainers and auditors).

Operators' KMS keys (AICR v1.1 ``validation.signingKey``) sign evidence for their own use;
their evidence counts here only once the key is registered, and automation registers it with
a maintainer token instead of the admin. A public key is public: the list shows the PEM.
The view only translates HTTP; registration is ``services.keys.signing_key_register``, the
same call the admin and ``manage.py register_key`` make.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import OuterRef, QuerySet, Subquery
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse

from aicr_site.parsers import BoundedJSONParser
from evidence_app.api.serializers import ErrorSerializer
from evidence_app.auth import BearerTokenAuthentication, HasRole
from evidence_app.models import Role, Signer, SigningKey
from evidence_app.services import keys

TAGS = ["keys"]
READ_ROLES = (Role.MAINTAINER, Role.AUDITOR)
# A PEM file uploaded as multipart ``public_key``: read no more than a key can be.
_MAX_FILE_BYTES = 4 * keys.MAX_PEM_CHARS


# --- serializers ------------------------------------------------------------------------------


class KeyRegisterInputSerializer(serializers.Serializer):
    # Lengths, blanks and characters are the service's to judge (one set of messages for the
    # admin, the API and the command); DRF still refuses NUL and lone surrogates by itself.
    name = serializers.CharField(
        allow_blank=True,
        trim_whitespace=False,
        help_text=f"What the key is, at most {keys.MAX_NAME_CHARS} characters.",
    )
    public_key = serializers.CharField(
        allow_blank=True,
        trim_whitespace=False,
        help_text="PEM SubjectPublicKeyInfo ('-----BEGIN PUBLIC KEY-----'): ECDSA P-256 or "
        "Ed25519. In a multipart body it may also be a file.",
    )


class SigningKeySerializer(serializers.ModelSerializer):
    public_key = serializers.CharField(source="public_key_pem")
    registered_by: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    key_pub_url = serializers.SerializerMethodField()

    class Meta:
        model = SigningKey
        # An explicit list: whatever is added to the model later is not shown by itself.
        fields = [
            "id",
            "name",
            "fingerprint",
            "algorithm",
            "public_key",
            "is_demo",
            "registered_by",
            "registered_at",
            "revoked_at",
            "key_pub_url",
        ]

    @extend_schema_field(OpenApiTypes.URI)
    def get_key_pub_url(self, key: SigningKey) -> str | None:
        """``/signers/<slug>/key.pub`` once a signer of this key exists (its first evidence is
        stored); null before, since that route serves signers' keys only."""
        slug = getattr(key, "signer_slug", None)
        if slug is None:
            return None
        return reverse("evidence:signer-key", args=[slug], request=self.context.get("request"))


class KeyConflictSerializer(serializers.Serializer):
    detail = serializers.CharField()
    field = serializers.CharField()
    code = serializers.CharField()
    existing = SigningKeySerializer()


class KeyErrorSerializer(serializers.Serializer):
    """A refusal naming the problem. A body the JSON decoder refuses (a NUL or a lone
    surrogate in a string, too large, too deep) has no ``field``: its ``detail`` names it."""

    detail = serializers.CharField()
    field = serializers.CharField(required=False, help_text="name, public_key or body.")
    code = serializers.CharField()


# --- views ------------------------------------------------------------------------------------


def _error(message: str, *, field: str, code: str) -> Response:
    return Response(
        {"detail": message, "field": field, "code": code}, status=status.HTTP_400_BAD_REQUEST
    )


def _with_signer_slug(queryset: QuerySet[SigningKey]) -> QuerySet[SigningKey]:
    return queryset.annotate(
        signer_slug=Subquery(Signer.objects.filter(key=OuterRef("pk")).values("slug")[:1])
    )


def _body_text(request: Request, data: dict[str, Any], name: str) -> Any:
    """A field of the body: a string (JSON or a form field), a multipart file's text, or
    whatever else JSON held (the serializer names it)."""
    upload = request.FILES.get(name)
    if upload is not None:
        # Past the limit the service says it is too long; non-ASCII bytes it names too.
        return upload.read(_MAX_FILE_BYTES).decode("ascii", "replace")
    return data.get(name)


@extend_schema_view(
    list=extend_schema(
        summary="List registered keys",
        description="Maintainers and auditors: every registered key, revoked ones too "
        "(`revoked_at`), with its public PEM (nothing private is stored).",
        responses={
            200: SigningKeySerializer(many=True),
            401: ErrorSerializer,
            403: ErrorSerializer,
        },
        tags=TAGS,
    ),
)
class SigningKeyViewSet(mixins.ListModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet):
    authentication_classes = [BearerTokenAuthentication]
    serializer_class = SigningKeySerializer
    parser_classes = [BoundedJSONParser, MultiPartParser]

    def get_permissions(self) -> list[Any]:
        if self.action == "create":
            return [HasRole.of(Role.MAINTAINER)()]
        return [HasRole.of(*READ_ROLES)()]

    def get_queryset(self) -> QuerySet[SigningKey]:
        return _with_signer_slug(SigningKey.objects.select_related("registered_by")).order_by("pk")

    @extend_schema(
        summary="Register a public key",
        description=(
            'Maintainers. JSON `{"name", "public_key"}` or multipart (the key as a field or '
            "a file). 201: registered; evidence signed by it verifies and counts from the next "
            "upload (as `registered-key`). 400 names the field and the problem (empty, a "
            "private key or a certificate pasted, not PEM, an unsupported algorithm such as "
            "RSA or ECDSA P-384, a name empty, too long or holding a NUL). 409: the same key "
            "(same fingerprint, whatever its PEM layout) is registered already, active or "
            "revoked; `existing` is that record and nothing changes (a revoked key stays "
            "revoked)."
        ),
        request={
            "application/json": KeyRegisterInputSerializer,
            "multipart/form-data": KeyRegisterInputSerializer,
        },
        responses={
            201: SigningKeySerializer,
            400: KeyErrorSerializer,
            401: ErrorSerializer,
            403: ErrorSerializer,
            409: KeyConflictSerializer,
        },
        tags=TAGS,
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = request.data
        if not isinstance(data, dict):
            return _error(
                'The body must be a JSON object {"name": …, "public_key": …}.',
                field="body",
                code="invalid",
            )
        fields = {name: _body_text(request, data, name) for name in ("name", "public_key")}
        given = KeyRegisterInputSerializer(data={k: v for k, v in fields.items() if v is not None})
        if not given.is_valid():
            field, problems = next(iter(given.errors.items()))
            return _error(f"{field}: {problems[0]}", field=field, code="invalid")
        try:
            key = keys.signing_key_register(
                name=given.validated_data["name"],
                public_key_pem=given.validated_data["public_key"],
                by=request.user,
            )
        except keys.SigningKeyDuplicate as exc:
            existing = _with_signer_slug(SigningKey.objects.filter(pk=exc.existing.pk)).get()
            return Response(
                {
                    "detail": exc.messages[0],
                    "field": "public_key",
                    "code": "duplicate",
                    "existing": SigningKeySerializer(existing, context={"request": request}).data,
                },
                status=status.HTTP_409_CONFLICT,
            )
        except DjangoValidationError as exc:
            code = str(getattr(exc, "code", None) or "invalid")
            field = "name" if code in keys.NAME_ERROR_CODES else "public_key"
            return _error(f"{field}: {exc.messages[0]}", field=field, code=code)
        body = SigningKeySerializer(key, context={"request": request}).data
        return Response(body, status=status.HTTP_201_CREATED)
