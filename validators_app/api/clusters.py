"""Clusters API: register (maintainers), list and read (maintainers and auditors), change a
cluster's scheduling settings and check inputs (maintainers, PATCH), test the connection
(maintainers).

Reads are not public: a cluster's server URL says where a site's GPU infrastructure lives.
A kubeconfig or an HF token goes in and never comes out: no serializer here has a field that
reads either (the token shows only as ``hf_token_set``).
Views only translate HTTP; the workflows are ``services.clusters`` calls.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

from aicr_site.parsers import BoundedJSONParser
from evidence_app.api.serializers import ErrorSerializer
from evidence_app.auth import BearerTokenAuthentication, HasRole
from evidence_app.models import Role
from evidence_app.verification._json import JSONLimits
from validators_app.crypto import KeyUnavailable
from validators_app.kubeconfig import MAX_KUBECONFIG_BYTES
from validators_app.models import Cluster, Environment, NcclFabric
from validators_app.scheduling import (
    MAX_HF_TOKEN_CHARS,
    MAX_SELECTOR_LABELS,
)
from validators_app.services.clusters import (
    SETTING_FIELDS,
    ClusterRegistrationError,
    cluster_register,
    cluster_settings_update,
    cluster_test_connection,
)
from validators_app.throttles import CLUSTER_TEST_THROTTLES

TAGS = ["clusters"]
READ_ROLES = (Role.MAINTAINER, Role.AUDITOR)
# A kubeconfig (up to MAX_KUBECONFIG_BYTES, escaped in JSON), a name, an environment and the
# settings: tolerations nest three levels ({"tolerations": [{...}]}), a node selector has up
# to MAX_SELECTOR_LABELS keys.
_BODY_LIMITS = JSONLimits(
    max_bytes=2 * MAX_KUBECONFIG_BYTES + 65536,
    max_depth=3,
    max_object_keys=MAX_SELECTOR_LABELS + 8,
)


# --- serializers ------------------------------------------------------------------------------


class TolerationSerializer(serializers.Serializer):
    """A Kubernetes toleration (documentation only: ``validators_app.scheduling`` checks it)."""

    key = serializers.CharField(required=False, help_text="Empty with Exists: every taint.")
    operator = serializers.ChoiceField(choices=["Exists", "Equal"], required=False)
    value = serializers.CharField(required=False, help_text="Empty with Exists.")
    effect = serializers.ChoiceField(
        choices=["NoSchedule", "PreferNoSchedule", "NoExecute"], required=False
    )
    tolerationSeconds = serializers.IntegerField(required=False, help_text="NoExecute only.")


class ClusterSettingsSerializer(serializers.Serializer):
    """The settings in a request (all optional; the service checks them, this documents them).
    Validation is left to ``services.clusters.settings_check`` so the rule lives in one place."""

    image_pull_secrets = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="Names of Secrets already in the run's namespace (DNS-1123 subdomains); "
        "one {name} each on the snapshot agent and validator Jobs (--image-pull-secret).",
    )
    node_selector = serializers.DictField(
        child=serializers.CharField(allow_blank=True),
        required=False,
        help_text="Label map (Kubernetes label syntax): the snapshot agent's nodeSelector "
        "instead of the GPU-node default, and AICR_NODE_SELECTOR for inner workloads.",
    )
    tolerations = TolerationSerializer(
        many=True, required=False, help_text="AICR_TOLERATIONS for the inner workloads."
    )
    agent_tolerations = TolerationSerializer(
        many=True,
        required=False,
        allow_null=True,
        help_text="The snapshot agent's tolerations: null = AICR's default (tolerate every "
        "taint), [] = none.",
    )
    hf_token = serializers.CharField(
        write_only=True,
        required=False,
        allow_blank=True,
        max_length=MAX_HF_TOKEN_CHARS,
        help_text="HF_TOKEN for inference-perf; stored encrypted, never shown back; '' clears.",
    )
    nccl_fabric = serializers.ChoiceField(
        choices=NcclFabric.choices,
        required=False,
        allow_blank=True,
        help_text="AICR_NCCL_FABRIC for nccl-all-reduce-bw-net ('' = EFA).",
    )
    require_scoped_inference_gateway = serializers.BooleanField(required=False)
    inference_perf_no_cleanup = serializers.BooleanField(required=False)


class ClusterRegisterBasicsSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100, help_text="Unique; letters, digits, . _ -")
    kubeconfig = serializers.CharField(
        write_only=True,
        trim_whitespace=False,
        max_length=MAX_KUBECONFIG_BYTES,
        help_text="Kubeconfig YAML with embedded credentials (token, client certificate data, "
        "or username/password); exec/auth-provider plugins and file paths are refused.",
    )
    environment = serializers.ChoiceField(choices=Environment.choices)


class ClusterRegisterInputSerializer(ClusterRegisterBasicsSerializer, ClusterSettingsSerializer):
    """What ``POST /api/v1/clusters/`` takes (the schema); the settings are optional."""


class ClusterCreatedSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    environment = serializers.CharField()
    server = serializers.CharField()


class ConnectionResultSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    server_version = serializers.CharField()
    detail = serializers.CharField()


class LastTestSerializer(serializers.Serializer):
    ok = serializers.BooleanField(source="last_test_ok")
    server_version = serializers.CharField(source="last_test_server_version")
    detail = serializers.CharField(source="last_test_detail")
    at = serializers.DateTimeField(source="last_tested_at")


class ClusterSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:cluster-detail")
    # A field named like ``Field.context``; DRF's metaclass moves declared fields off the class.
    context = serializers.CharField(source="context_name")  # type: ignore[assignment]
    created_by: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    last_test = serializers.SerializerMethodField()
    image_pull_secrets = serializers.ListField(child=serializers.CharField())
    node_selector = serializers.DictField(child=serializers.CharField(allow_blank=True))
    tolerations = TolerationSerializer(many=True)
    agent_tolerations = TolerationSerializer(
        many=True, allow_null=True, help_text="null: AICR's default, tolerate every taint."
    )
    hf_token_set = serializers.BooleanField(
        read_only=True, help_text="Whether an HF token is stored (never the token)."
    )

    class Meta:
        model = Cluster
        # An explicit list: a new model field (the kubeconfig above all) never appears by itself.
        fields = [
            "id",
            "url",
            "name",
            "environment",
            "server",
            "context",
            "auth_kind",
            "created_by",
            "created_at",
            "last_test",
            "image_pull_secrets",
            "node_selector",
            "tolerations",
            "agent_tolerations",
            "hf_token_set",
            "nccl_fabric",
            "require_scoped_inference_gateway",
            "inference_perf_no_cleanup",
        ]

    @extend_schema_field(LastTestSerializer(allow_null=True))
    def get_last_test(self, cluster: Cluster) -> dict[str, Any] | None:
        if cluster.last_tested_at is None:
            return None
        return dict(LastTestSerializer(cluster).data)


# --- views ------------------------------------------------------------------------------------


def _error(message: str, code: int, field: str | None = None) -> Response:
    body: dict[str, Any] = {"detail": message}
    if field:
        body["field"] = field
    return Response(body, status=code)


@extend_schema_view(
    list=extend_schema(
        summary="List clusters",
        description="Maintainers and auditors. Never includes the kubeconfig.",
        responses={200: ClusterSerializer(many=True), 401: ErrorSerializer, 403: ErrorSerializer},
        tags=TAGS,
    ),
    partial_update=extend_schema(
        summary="Change a cluster's settings",
        description=(
            "Maintainers. Only the settings named in the body change (all are checked first; "
            "a refusal is a 400 naming the field and stores nothing). `hf_token` is write-only "
            "and shows as `hf_token_set`."
        ),
        request=ClusterSettingsSerializer,
        responses={
            200: ClusterSerializer,
            400: ErrorSerializer,
            401: ErrorSerializer,
            403: ErrorSerializer,
            404: ErrorSerializer,
            503: ErrorSerializer,
        },
        tags=TAGS,
    ),
    retrieve=extend_schema(
        summary="One cluster",
        description="Maintainers and auditors: server, context, auth kind, last connection test.",
        responses={
            200: ClusterSerializer,
            401: ErrorSerializer,
            403: ErrorSerializer,
            404: ErrorSerializer,
        },
        tags=TAGS,
    ),
)
class ClusterViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    viewsets.GenericViewSet,
):
    http_method_names = ["get", "head", "options", "post", "patch"]
    authentication_classes = [BearerTokenAuthentication]
    serializer_class = ClusterSerializer
    parser_classes = [BoundedJSONParser]
    json_limits = _BODY_LIMITS

    def get_permissions(self) -> list[Any]:
        if self.action in ("create", "partial_update"):
            return [HasRole.of(Role.MAINTAINER)()]
        return [HasRole.of(*READ_ROLES)()]

    def get_queryset(self) -> QuerySet[Cluster]:
        return (
            Cluster.objects.select_related("created_by")
            .defer("kubeconfig_encrypted")
            .order_by("name")
        )

    def _too_large(self, request: Request) -> Response | None:
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > _BODY_LIMITS.max_bytes:
            return _error(
                f"request body: {length} bytes is more than the {_BODY_LIMITS.max_bytes}-byte "
                f"limit (a kubeconfig may be at most {MAX_KUBECONFIG_BYTES} bytes)",
                status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
            )
        return None

    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        if (refused := self._too_large(request)) is not None:
            return refused
        cluster = self.get_object()
        if not isinstance(request.data, dict) or not request.data:
            return _error(
                f"The body must be a JSON object with one or more of: {', '.join(SETTING_FIELDS)}.",
                status.HTTP_400_BAD_REQUEST,
            )
        try:
            cluster = cluster_settings_update(cluster=cluster, settings=dict(request.data))
        except ClusterRegistrationError as exc:
            return _error(exc.message, status.HTTP_400_BAD_REQUEST, exc.field)
        except KeyUnavailable as exc:
            return _error(str(exc), status.HTTP_503_SERVICE_UNAVAILABLE)
        return Response(ClusterSerializer(cluster, context={"request": request}).data)

    @extend_schema(
        summary="Register a cluster",
        description=(
            "Maintainers. The kubeconfig is checked (clear 400 naming the problem), stored "
            "encrypted, and never shown back. `http://` servers only for `simulated` clusters "
            "on a loopback host; `real` clusters need https with certificate verification."
        ),
        request=ClusterRegisterInputSerializer,
        responses={
            201: ClusterCreatedSerializer,
            400: ErrorSerializer,
            401: ErrorSerializer,
            403: ErrorSerializer,
            413: ErrorSerializer,
            503: ErrorSerializer,
        },
        tags=TAGS,
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        if (refused := self._too_large(request)) is not None:
            return refused
        if not isinstance(request.data, dict):
            return _error(
                "The body must be a JSON object with name, kubeconfig, environment.",
                status.HTTP_400_BAD_REQUEST,
            )
        basics = {k: v for k, v in request.data.items() if k not in SETTING_FIELDS}
        serializer = ClusterRegisterBasicsSerializer(data=basics)
        if not serializer.is_valid():
            field, problems = next(iter(serializer.errors.items()))
            return _error(f"{field}: {problems[0]}", status.HTTP_400_BAD_REQUEST, field)
        data = serializer.validated_data
        unknown = sorted(set(request.data) - set(SETTING_FIELDS) - set(data))
        if unknown:
            return _error(
                f"{unknown[0]}: not a cluster field", status.HTTP_400_BAD_REQUEST, unknown[0]
            )
        try:
            cluster = cluster_register(
                name=data["name"],
                kubeconfig_text=data["kubeconfig"],
                environment=data["environment"],
                by=request.user,
                settings={k: v for k, v in request.data.items() if k in SETTING_FIELDS},
            )
        except ClusterRegistrationError as exc:
            return _error(exc.message, status.HTTP_400_BAD_REQUEST, exc.field)
        except KeyUnavailable as exc:
            return _error(str(exc), status.HTTP_503_SERVICE_UNAVAILABLE)
        body = ClusterCreatedSerializer(cluster).data
        headers = {"Location": reverse("api:cluster-detail", args=[cluster.pk], request=request)}
        return Response(body, status=status.HTTP_201_CREATED, headers=headers)


class ClusterTestView(APIView):
    """Ask the cluster's API server for its version, within a timeout."""

    authentication_classes = [BearerTokenAuthentication]
    permission_classes = [HasRole.of(Role.MAINTAINER)]
    throttle_classes = list(CLUSTER_TEST_THROTTLES)

    @extend_schema(
        summary="Test a cluster's connection",
        description=(
            "Maintainers. `ok` with the server's version (at most 100 characters), or one reason "
            "class: `not reachable` (refused, timed out, dropped or TLS alike), `refused` (an "
            "address this site does not connect to), credentials refused (401/403) or `invalid "
            "answer`. The result is also recorded on the cluster. Throttled per user and "
            "cluster (`CLUSTER_TEST_RATE`) and per user across clusters "
            "(`CLUSTER_TEST_USER_RATE`)."
        ),
        request=None,
        responses={
            200: ConnectionResultSerializer,
            401: ErrorSerializer,
            403: ErrorSerializer,
            404: ErrorSerializer,
            429: ErrorSerializer,
        },
        tags=TAGS,
    )
    def post(self, request: Request, pk: int) -> Response:
        cluster = get_object_or_404(Cluster, pk=pk)
        result = cluster_test_connection(cluster=cluster)
        return Response(
            {"ok": result.ok, "server_version": result.server_version, "detail": result.detail}
        )
