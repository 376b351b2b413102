"""A cluster's scheduling settings and check-scoped inputs, checked as Kubernetes checks them.

Django-free: the one place these rules live (API, admin and services call ``check_*``; the
orchestrator receives the normalised values). Each ``check_*`` returns the normalised value or
raises ``SchedulingError(field, message)`` naming the field and what is wrong.

What the settings mean follows ``aicr validate`` (NVIDIA/aicr ``pkg/cli/validate.go``,
``pkg/k8s/agent/job.go``, ``pkg/validator/v1/job_plan_internal.go``):

- ``image_pull_secrets``: ``--image-pull-secret``; one ``{name}`` per Secret on the snapshot agent
  Job and on every validator Job (the Secrets must already exist in the run's namespace).
- ``node_selector``: ``--node-selector``; the agent's nodeSelector (instead of the GPU-node
  default) and ``AICR_NODE_SELECTOR`` for the validators' inner workloads.
- ``tolerations``: ``--toleration``; ``AICR_TOLERATIONS`` for the inner workloads.
- ``agent_tolerations``: the snapshot agent's tolerations. ``None`` is AICR's default (tolerate
  every taint, AICR-V1.md §6); ``[]`` opts out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "NCCL_FABRICS",
    "SchedulingError",
    "check_hf_token",
    "check_image_pull_secrets",
    "check_nccl_fabric",
    "check_node_selector",
    "check_tolerations",
]

# AICR_NCCL_FABRIC: unset keeps the NET check on EFA; "roce" selects the RoCE runtime.
NCCL_FABRICS: tuple[str, ...] = ("", "roce")
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
OPERATORS = ("Exists", "Equal")
MAX_SECRETS = 16
MAX_SELECTOR_LABELS = 32
MAX_TOLERATIONS = 32
MAX_HF_TOKEN_CHARS = 512

# k8s.io/apimachinery/pkg/util/validation: DNS-1123 subdomain, qualified name, label value.
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_TOKEN_CHARS = re.compile(r"[\x21-\x7e]+")  # printable ASCII, no spaces: it goes into an env var
_TOLERATION_KEYS = frozenset({"key", "operator", "value", "effect", "tolerationSeconds"})


class SchedulingError(ValueError):
    """A setting was refused: ``field`` is the input at fault, the message says why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def _subdomain_problem(name: str) -> str | None:
    if not name or len(name) > 253:
        return "must be 1-253 characters"
    if not _DNS1123_SUBDOMAIN.fullmatch(name):
        return (
            "must be a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', starting and "
            "ending with a letter or digit)"
        )
    return None


def _qualified_name_problem(key: str) -> str | None:
    """Kubernetes' IsQualifiedName: ``[prefix/]name``, name ≤ 63, prefix a DNS-1123 subdomain."""
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        return "has an empty prefix before '/'"
    if slash and (problem := _subdomain_problem(prefix)):
        return f"prefix {problem}"
    if not name or len(name) > 63:
        return "name part must be 1-63 characters"
    if not _QUALIFIED_NAME.fullmatch(name):
        return (
            "name part must consist of letters, digits, '-', '_' or '.', starting and ending "
            "with a letter or digit"
        )
    return None


def _label_value_problem(value: str) -> str | None:
    if len(value) > 63:
        return "must be at most 63 characters"
    if value and not _QUALIFIED_NAME.fullmatch(value):
        return (
            "must be empty or letters, digits, '-', '_' or '.', starting and ending with a "
            "letter or digit"
        )
    return None


def check_image_pull_secrets(value: Any, field: str = "image_pull_secrets") -> list[str]:
    """Names of Secrets (DNS-1123 subdomains), each once, in the order given."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SchedulingError(field, f"{field}: must be a list of Secret names")
    if len(value) > MAX_SECRETS:
        raise SchedulingError(field, f"{field}: at most {MAX_SECRETS} Secrets")
    for index, name in enumerate(value):
        if problem := _subdomain_problem(name):
            raise SchedulingError(field, f"{field}[{index}]: {name!r} {problem}")
    if len(set(value)) != len(value):
        raise SchedulingError(field, f"{field}: a Secret is named more than once")
    return list(value)


def check_node_selector(value: Any, field: str = "node_selector") -> dict[str, str]:
    """A label map: keys are qualified names, values label values (empty allowed)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SchedulingError(field, f"{field}: must be an object of label key → value")
    if len(value) > MAX_SELECTOR_LABELS:
        raise SchedulingError(field, f"{field}: at most {MAX_SELECTOR_LABELS} labels")
    selector: dict[str, str] = {}
    for key, label in value.items():
        if not isinstance(key, str) or not isinstance(label, str):
            raise SchedulingError(field, f"{field}: keys and values must be strings")
        if problem := _qualified_name_problem(key):
            raise SchedulingError(field, f"{field}: label key {key!r} {problem}")
        if problem := _label_value_problem(label):
            raise SchedulingError(field, f"{field}: value of {key!r}: {label!r} {problem}")
        # AICR_NODE_SELECTOR is "k=v,k=v": a comma or '=' cannot occur in a valid key or value.
        selector[key] = label
    return dict(sorted(selector.items()))


def _check_toleration(raw: Any, where: str) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise SchedulingError(where.split("[")[0], f"{where}: must be a toleration object")
    field = where.split("[")[0]
    unknown = sorted(str(k) for k in raw if k not in _TOLERATION_KEYS)
    if unknown:
        raise SchedulingError(
            field,
            f"{where}: unknown field {unknown[0]!r} (allowed: key, operator, value, effect, "
            "tolerationSeconds)",
        )
    key, operator = raw.get("key", ""), raw.get("operator", "")
    value, effect = raw.get("value", ""), raw.get("effect", "")
    for name, item in (("key", key), ("operator", operator), ("value", value), ("effect", effect)):
        if not isinstance(item, str):
            raise SchedulingError(field, f"{where}.{name}: must be a string")
    operator = operator or "Equal"  # Kubernetes' default
    if operator not in OPERATORS:
        raise SchedulingError(field, f"{where}.operator: must be Exists or Equal")
    if effect and effect not in EFFECTS:
        raise SchedulingError(
            field, f"{where}.effect: must be NoSchedule, PreferNoSchedule or NoExecute"
        )
    if key:
        if problem := _qualified_name_problem(key):
            raise SchedulingError(field, f"{where}.key: {key!r} {problem}")
    elif operator != "Exists":
        # Kubernetes: an empty key with operator Equal is invalid (it would match nothing).
        raise SchedulingError(field, f"{where}.key: an empty key needs operator Exists")
    if operator == "Exists" and value:
        raise SchedulingError(field, f"{where}.value: must be empty when operator is Exists")
    if problem := _label_value_problem(value):
        raise SchedulingError(field, f"{where}.value: {value!r} {problem}")
    toleration: dict[str, Any] = {}
    if key:
        toleration["key"] = key
    toleration["operator"] = operator
    if value:
        toleration["value"] = value
    if effect:
        toleration["effect"] = effect
    if "tolerationSeconds" in raw and raw["tolerationSeconds"] is not None:
        seconds = raw["tolerationSeconds"]
        if isinstance(seconds, bool) or not isinstance(seconds, int):
            raise SchedulingError(field, f"{where}.tolerationSeconds: must be an integer")
        if effect != "NoExecute":
            raise SchedulingError(
                field, f"{where}.tolerationSeconds: only valid with effect NoExecute"
            )
        if not 0 <= seconds <= 2**31 - 1:
            raise SchedulingError(field, f"{where}.tolerationSeconds: must be 0-2147483647")
        toleration["tolerationSeconds"] = seconds
    return toleration


def check_tolerations(
    value: Any, field: str = "tolerations", *, nullable: bool = False
) -> list[dict[str, Any]] | None:
    """Kubernetes toleration objects, normalised (``operator`` always present). ``None`` is
    kept only where ``nullable`` (the agent's "AICR default")."""
    if value is None:
        return None if nullable else []
    if not isinstance(value, list):
        raise SchedulingError(field, f"{field}: must be a list of toleration objects")
    if len(value) > MAX_TOLERATIONS:
        raise SchedulingError(field, f"{field}: at most {MAX_TOLERATIONS} tolerations")
    return [_check_toleration(item, f"{field}[{i}]") for i, item in enumerate(value)]


def check_nccl_fabric(value: Any, field: str = "nccl_fabric") -> str:
    if value is None:
        return ""
    if value not in NCCL_FABRICS:
        raise SchedulingError(field, f"{field}: must be '' (EFA, AICR's default) or 'roce'")
    return str(value)


def check_hf_token(value: Any, field: str = "hf_token") -> str:
    """A Hugging Face token: printable ASCII without spaces; "" clears it."""
    if value is None or value == "":
        return ""
    if not isinstance(value, str):
        raise SchedulingError(field, f"{field}: must be a string")
    if len(value) > MAX_HF_TOKEN_CHARS or not _TOKEN_CHARS.fullmatch(value):
        # The value is never echoed back, not even in a refusal.
        raise SchedulingError(
            field,
            f"{field}: must be 1-{MAX_HF_TOKEN_CHARS} printable ASCII characters without spaces",
        )
    return value
