"""Clusters: register one from a checked kubeconfig, test its connection, open a client to it,
re-encrypt kubeconfigs after a key rotation.

The kubeconfig is checked (``validators_app.kubeconfig``) before anything is stored, and what
is stored is the checked, minimal kubeconfig, encrypted (``validators_app.crypto``). It is
decrypted only inside ``cluster_api_client`` and never logged.

Where a cluster may be reached is ``cluster_policy`` (its environment and the site's
``CLUSTER_PRIVATE_ADDRESSES``/``CLUSTER_ALLOWED_NETWORKS``), checked at registration for the
address as spelled and at every connection for the address resolved (``aicr_site.lib.outbound``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.views.decorators.debug import sensitive_variables

from aicr_site.lib import outbound
from validators_app import crypto, kubeconfig, orchestrator, scheduling
from validators_app.models import Cluster, Environment
from validators_app.orchestrator.connection import MAX_ANSWER_BYTES as MAX_VERSION_ANSWER_BYTES

logger = logging.getLogger(__name__)

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
NAME_RULE = "1-100 characters: letters, digits, '.', '_' or '-', starting with a letter or digit"
MAX_DETAIL_CHARS = 2000


class ClusterRegistrationError(ValueError):
    """A registration was refused: ``field`` is the input at fault, the message says why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def _check_name(name: Any, *, exclude_pk: int | None = None) -> str:
    cleaned = name.strip() if isinstance(name, str) else ""
    if not NAME_PATTERN.fullmatch(cleaned):
        raise ClusterRegistrationError("name", f"name: {NAME_RULE}")
    same_name = Cluster.objects.filter(name=cleaned)
    if exclude_pk is not None:
        same_name = same_name.exclude(pk=exclude_pk)
    if same_name.exists():
        raise ClusterRegistrationError("name", f"name: a cluster named {cleaned!r} already exists")
    return cleaned


# --- scheduling settings and check-scoped inputs ------------------------------------------------

SETTING_FIELDS = (
    "image_pull_secrets",
    "node_selector",
    "tolerations",
    "agent_tolerations",
    "hf_token",
    "nccl_fabric",
    "require_scoped_inference_gateway",
    "inference_perf_no_cleanup",
)
_FLAGS = ("require_scoped_inference_gateway", "inference_perf_no_cleanup")


@sensitive_variables("values", "token")
def settings_check(values: Any) -> dict[str, Any]:
    """The settings present in ``values``, checked (``validators_app.scheduling``) and
    normalised; absent keys are left out so an update changes only what it names. ``hf_token``
    stays plain here: ``settings_columns`` encrypts it."""
    if not isinstance(values, dict):
        raise ClusterRegistrationError("settings", "settings: must be an object")
    unknown = sorted(str(key) for key in values if key not in SETTING_FIELDS)
    if unknown:
        raise ClusterRegistrationError(unknown[0], f"{unknown[0]}: not a cluster setting")
    checked: dict[str, Any] = {}
    try:
        if "image_pull_secrets" in values:
            checked["image_pull_secrets"] = scheduling.check_image_pull_secrets(
                values["image_pull_secrets"]
            )
        if "node_selector" in values:
            checked["node_selector"] = scheduling.check_node_selector(values["node_selector"])
        if "tolerations" in values:
            checked["tolerations"] = scheduling.check_tolerations(values["tolerations"])
        if "agent_tolerations" in values:
            checked["agent_tolerations"] = scheduling.check_tolerations(
                values["agent_tolerations"], "agent_tolerations", nullable=True
            )
        if "nccl_fabric" in values:
            checked["nccl_fabric"] = scheduling.check_nccl_fabric(values["nccl_fabric"])
        if "hf_token" in values:
            checked["hf_token"] = scheduling.check_hf_token(values["hf_token"])
    except scheduling.SchedulingError as exc:
        raise ClusterRegistrationError(exc.field, exc.message) from None
    for flag in _FLAGS:
        if flag in values:
            if not isinstance(values[flag], bool):
                raise ClusterRegistrationError(flag, f"{flag}: must be true or false")
            checked[flag] = values[flag]
    return checked


@sensitive_variables("checked", "token")
def settings_columns(checked: dict[str, Any]) -> dict[str, Any]:
    """Model column values for checked settings: the HF token encrypted ("" clears it)."""
    columns = {key: value for key, value in checked.items() if key != "hf_token"}
    if "hf_token" in checked:
        token = checked["hf_token"]
        columns["hf_token_encrypted"] = crypto.secret_encrypt(token) if token else ""
    return columns


@sensitive_variables("settings", "columns")
def cluster_settings_update(*, cluster: Cluster, settings: Any) -> Cluster:
    """Change the settings named in ``settings`` (all checked before any is stored)."""
    columns = settings_columns(settings_check(settings))
    if columns:
        columns["updated_at"] = timezone.now()
        # update(), not save(): a concurrent rename or connection test is not overwritten.
        Cluster.objects.filter(pk=cluster.pk).update(**columns)
        for field_name, value in columns.items():
            setattr(cluster, field_name, value)
    logger.info("cluster %s settings updated: %s", cluster.pk, ", ".join(sorted(columns)) or "-")
    return cluster


def cluster_policy(environment: str) -> outbound.Policy:
    """The addresses a cluster of ``environment`` may be reached at on this site."""
    return kubeconfig.server_policy(
        environment,
        private=settings.CLUSTER_PRIVATE_ADDRESSES,
        allowed_networks=tuple(settings.CLUSTER_ALLOWED_NETWORKS),
    )


def run_limits() -> outbound.Limits:
    """What each answer from a cluster may cost during a run."""
    return outbound.Limits(
        max_answer_bytes=settings.CLUSTER_MAX_ANSWER_BYTES,
        deadline_s=settings.CLUSTER_ANSWER_DEADLINE_SECONDS,
    )


@sensitive_variables("text")
def _check_kubeconfig(text: Any, environment: str) -> kubeconfig.CheckedKubeconfig:
    if not isinstance(text, str | bytes):
        raise ClusterRegistrationError("kubeconfig", "kubeconfig: must be YAML text")
    try:
        return kubeconfig.check_kubeconfig(
            text, environment=environment, policy=cluster_policy(environment)
        )
    except kubeconfig.KubeconfigError as exc:
        raise ClusterRegistrationError("kubeconfig", str(exc)) from None


def registration_check(
    *, name: Any, kubeconfig_text: Any, environment: Any
) -> kubeconfig.CheckedKubeconfig:
    """Everything ``cluster_register`` checks, without storing anything (for forms)."""
    _check_name(name)
    if environment not in Environment.values:
        raise ClusterRegistrationError(
            "environment", f"environment: must be one of {', '.join(Environment.values)}"
        )
    return _check_kubeconfig(kubeconfig_text, environment)


@sensitive_variables("kubeconfig_text", "checked", "settings", "columns")
def cluster_register(
    *,
    name: str,
    kubeconfig_text: str | bytes,
    environment: str,
    by: Any = None,
    settings: Any = None,
) -> Cluster:
    """Check ``kubeconfig_text`` for ``environment`` (and ``settings``, see ``settings_check``)
    and store the cluster with its secrets encrypted. Raises ``ClusterRegistrationError`` (bad
    input) or ``crypto.KeyUnavailable`` (no key)."""
    checked = registration_check(
        name=name, kubeconfig_text=kubeconfig_text, environment=environment
    )
    columns = settings_columns(settings_check(settings or {}))
    name = name.strip()
    info = checked.info
    try:
        with transaction.atomic():
            cluster = Cluster.objects.create(
                name=name,
                environment=environment,
                server=info.server,
                context_name=info.context[:253],
                auth_kind=info.auth_kind,
                kubeconfig_encrypted=crypto.kubeconfig_encrypt(checked.minimal_yaml),
                created_by=by if getattr(by, "is_authenticated", False) else None,
                **columns,
            )
    except IntegrityError:  # the same name registered between the check and the insert
        raise ClusterRegistrationError(
            "name", f"name: a cluster named {name!r} already exists"
        ) from None
    logger.info("cluster %s registered (%s, %s)", cluster.pk, environment, info.server)
    return cluster


def update_check(
    *, cluster: Cluster, name: Any, kubeconfig_text: Any = None
) -> kubeconfig.CheckedKubeconfig | None:
    """Everything ``cluster_update`` checks, without storing anything (for forms)."""
    _check_name(name, exclude_pk=cluster.pk)
    if not kubeconfig_text:
        return None
    return _check_kubeconfig(kubeconfig_text, cluster.environment)


@sensitive_variables("kubeconfig_text", "checked")
def cluster_update(*, cluster: Cluster, name: str, kubeconfig_text: str | None = None) -> Cluster:
    """Rename ``cluster`` and, with ``kubeconfig_text``, replace its kubeconfig (checked for the
    cluster's environment, which never changes: a simulated cluster does not become real).
    A new kubeconfig clears the last connection test, which was about the old one."""
    checked = update_check(cluster=cluster, name=name, kubeconfig_text=kubeconfig_text)
    fields: dict[str, Any] = {"name": name.strip(), "updated_at": timezone.now()}
    if checked is not None:
        fields |= {
            "server": checked.info.server,
            "context_name": checked.info.context[:253],
            "auth_kind": checked.info.auth_kind,
            "kubeconfig_encrypted": crypto.kubeconfig_encrypt(checked.minimal_yaml),
            "last_test_ok": None,
            "last_test_server_version": "",
            "last_test_detail": "",
            "last_tested_at": None,
        }
    try:
        with transaction.atomic():
            Cluster.objects.filter(pk=cluster.pk).update(**fields)
    except IntegrityError:
        raise ClusterRegistrationError(
            "name", f"name: a cluster named {fields['name']!r} already exists"
        ) from None
    for field_name, value in fields.items():
        setattr(cluster, field_name, value)
    logger.info("cluster %s updated (new kubeconfig: %s)", cluster.pk, checked is not None)
    return cluster


@contextmanager
@sensitive_variables("text")
def cluster_api_client(cluster: Cluster, *, limits: outbound.Limits | None = None) -> Iterator[Any]:
    """A ``kubernetes`` ApiClient for ``cluster`` (closed after the block), pinned to the
    address its server resolved to now and checked against ``cluster_policy``; each answer
    within ``limits`` (default ``run_limits()``). The stored kubeconfig is checked again: rules
    may have tightened since it was registered. Raises ``crypto.KeyUnavailable``,
    ``kubeconfig.KubeconfigError`` or ``outbound.DestinationRefused``."""
    text = crypto.kubeconfig_decrypt(cluster.kubeconfig_encrypted)
    with kubeconfig.api_client(
        text,
        environment=cluster.environment,
        policy=cluster_policy(cluster.environment),
        limits=limits or run_limits(),
    ) as api:
        yield api


def cluster_test_connection(
    *, cluster: Cluster, timeout_s: float | None = None
) -> orchestrator.ConnectionResult:
    """Ask the cluster for its version, the whole exchange within ``timeout_s`` (default
    ``CLUSTER_TEST_TIMEOUT_SECONDS``), and record the answer on it."""
    timeout = settings.CLUSTER_TEST_TIMEOUT_SECONDS if timeout_s is None else timeout_s
    limits = outbound.Limits(max_answer_bytes=MAX_VERSION_ANSWER_BYTES, deadline_s=timeout)
    try:
        with cluster_api_client(cluster, limits=limits) as api:
            result = orchestrator.test_connection(api, timeout_s=timeout)
    except (crypto.KeyUnavailable, kubeconfig.KubeconfigError) as exc:
        result = orchestrator.ConnectionResult(ok=False, server_version="", detail=str(exc))
    except outbound.DestinationRefused as exc:
        result = orchestrator.ConnectionResult(
            ok=False, server_version="", detail=f"refused: {exc.message}"
        )
    tested_at = timezone.now()
    fields = {
        "last_test_ok": result.ok,
        "last_test_server_version": result.server_version[:100],
        "last_test_detail": result.detail[:MAX_DETAIL_CHARS],
        "last_tested_at": tested_at,
    }
    # update(), not save(): a concurrent edit of other fields must not be overwritten.
    Cluster.objects.filter(pk=cluster.pk).update(**fields)
    for field_name, value in fields.items():
        setattr(cluster, field_name, value)
    logger.info("cluster %s connection test: ok=%s", cluster.pk, result.ok)
    return result


def clusters_reencrypt() -> int:
    """Re-encrypt every kubeconfig under the first configured key; all or nothing."""
    count = 0
    with transaction.atomic():
        # Row locks: a registration or edit running now must not be overwritten by a value
        # read before it.
        for cluster in Cluster.objects.select_for_update().only(
            "pk", "kubeconfig_encrypted", "hf_token_encrypted"
        ):
            Cluster.objects.filter(pk=cluster.pk).update(
                kubeconfig_encrypted=crypto.kubeconfig_reencrypt(cluster.kubeconfig_encrypted),
                hf_token_encrypted=crypto.kubeconfig_reencrypt(cluster.hf_token_encrypted)
                if cluster.hf_token_encrypted
                else "",
            )
            count += 1
    return count
