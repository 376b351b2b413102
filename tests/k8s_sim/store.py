"""The simulated cluster's object store: etcd plus the generic registry of kube-apiserver.

Objects are plain dicts in the JSON shape the API server stores. Every write bumps one global
``resourceVersion`` and appends a watch event; the event history is bounded like the watch
cache, so a watch from a resourceVersion older than the history gets ``410 Gone`` (Expired).
"""

from __future__ import annotations

import copy
import re
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


@dataclass(frozen=True)
class Resource:
    plural: str
    kind: str
    group: str  # "" for the core group
    version: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    verbs: tuple[str, ...] = (
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    )
    field_labels: frozenset[str] = frozenset({"metadata.name", "metadata.namespace"})

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()


RESOURCES: tuple[Resource, ...] = (
    Resource(
        "namespaces",
        "Namespace",
        "",
        "v1",
        False,
        ("ns",),
        field_labels=frozenset({"metadata.name", "status.phase"}),
    ),
    Resource(
        "nodes",
        "Node",
        "",
        "v1",
        False,
        ("no",),
        field_labels=frozenset({"metadata.name", "spec.unschedulable"}),
    ),
    Resource(
        "pods",
        "Pod",
        "",
        "v1",
        True,
        ("po",),
        field_labels=frozenset(
            {
                "metadata.name",
                "metadata.namespace",
                "spec.nodeName",
                "status.phase",
                "spec.serviceAccountName",
            }
        ),
    ),
    Resource("configmaps", "ConfigMap", "", "v1", True, ("cm",)),
    Resource("serviceaccounts", "ServiceAccount", "", "v1", True, ("sa",)),
    Resource("secrets", "Secret", "", "v1", True),
    Resource("events", "Event", "", "v1", True, ("ev",)),
    Resource(
        "jobs",
        "Job",
        "batch",
        "v1",
        True,
        field_labels=frozenset({"metadata.name", "metadata.namespace", "status.successful"}),
    ),
    Resource("roles", "Role", "rbac.authorization.k8s.io", "v1", True),
    Resource("rolebindings", "RoleBinding", "rbac.authorization.k8s.io", "v1", True),
    Resource("clusterroles", "ClusterRole", "rbac.authorization.k8s.io", "v1", False),
    Resource("clusterrolebindings", "ClusterRoleBinding", "rbac.authorization.k8s.io", "v1", False),
    Resource("deployments", "Deployment", "apps", "v1", True, ("deploy",)),
    Resource("daemonsets", "DaemonSet", "apps", "v1", True, ("ds",)),
)

BY_GROUP_VERSION: dict[tuple[str, str], dict[str, Resource]] = {}
for _resource in RESOURCES:
    BY_GROUP_VERSION.setdefault((_resource.group, _resource.version), {})[_resource.plural] = (
        _resource
    )
BY_KIND: dict[str, Resource] = {resource.kind: resource for resource in RESOURCES}

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_CONFIGMAP_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
MAX_CONFIGMAP_BYTES = 1024 * 1024


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ApiError(Exception):
    """An error the API server answers with a ``Status`` object."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        details: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message
        self.details = dict(details or {})
        self.headers = dict(headers or {})

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


def _details(resource: Resource, name: str) -> dict[str, str]:
    details = {"name": name, "kind": resource.plural}
    if resource.group:
        details["group"] = resource.group
    return details


def _qualified(resource: Resource) -> str:
    return f"{resource.plural}.{resource.group}" if resource.group else resource.plural


def not_found(resource: Resource, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{_qualified(resource)} "{name}" not found',
        details=_details(resource, name),
    )


def invalid(resource: Resource, name: str, causes: list[tuple[str, str]]) -> ApiError:
    text = ", ".join(f"{field}: {message}" for field, message in causes)
    return ApiError(
        422,
        "Invalid",
        f'{resource.kind}.{resource.group or "core"} "{name}" is invalid: {text}'.replace(
            ".core", ""
        ),
        details={
            **_details(resource, name),
            "kind": resource.kind,
            "causes": [
                {"reason": "FieldValueInvalid", "message": message, "field": field}
                for field, message in causes
            ],
        },
    )


def validate_object(resource: Resource, obj: Mapping[str, Any]) -> None:
    """The subset of apiserver validation an orchestrator bug would trip over."""
    meta = obj.get("metadata") or {}
    name = meta.get("name") or ""
    causes: list[tuple[str, str]] = []
    if not name:
        causes.append(("metadata.name", "Required value: name or generateName is required"))
    elif len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        causes.append(
            (
                "metadata.name",
                f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must '
                "consist of lower case alphanumeric characters, '-' or '.'",
            )
        )
    # Job names end up in a label value (63) and namespaces are DNS labels.
    if (
        resource.plural in ("jobs", "namespaces", "serviceaccounts")
        and name
        and (len(name) > 63 or not _DNS_LABEL.match(name))
    ):
        causes.append(
            ("metadata.name", f'Invalid value: "{name}": must be no more than 63 characters')
        )
    for key, value in (meta.get("labels") or {}).items():
        prefix, _, label = key.rpartition("/")
        if not label or len(label) > 63 or not _LABEL_NAME.match(label) or len(prefix) > 253:
            causes.append(("metadata.labels", f'Invalid value: "{key}": name part must be valid'))
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_NAME.match(value):
            causes.append(
                (
                    "metadata.labels",
                    f'Invalid value: "{value}": a valid label must be an empty '
                    "string or consist of alphanumeric characters, '-', '_' or '.', and must be no "
                    "more than 63 characters",
                )
            )
    if resource.plural == "configmaps":
        data = obj.get("data") or {}
        size = 0
        for key, value in data.items():
            if not _CONFIGMAP_KEY.match(key) or len(key) > 253:
                causes.append(
                    (
                        f"data[{key}]",
                        "a valid config key must consist of alphanumeric "
                        "characters, '-', '_' or '.'",
                    )
                )
            if not isinstance(value, str):
                causes.append((f"data[{key}]", "Invalid value: must be a string"))
            else:
                size += len(key) + len(value.encode())
        if size > MAX_CONFIGMAP_BYTES:
            causes.append(("[]", f"Too long: must have at most {MAX_CONFIGMAP_BYTES} bytes"))
    if resource.plural == "jobs":
        spec = obj.get("spec") or {}
        template = spec.get("template") or {}
        containers = (template.get("spec") or {}).get("containers") or []
        if not containers:
            causes.append(("spec.template.spec.containers", "Required value"))
        restart = (template.get("spec") or {}).get("restartPolicy")
        if restart not in ("Never", "OnFailure"):
            causes.append(
                (
                    "spec.template.spec.restartPolicy",
                    f'Unsupported value: "{restart}": supported values: "OnFailure", "Never"',
                )
            )
        for container in containers:
            if not container.get("name") or not container.get("image"):
                causes.append(("spec.template.spec.containers", "name and image are required"))
    if causes:
        raise invalid(resource, name, causes)


@dataclass(frozen=True)
class WatchEvent:
    resource_version: int
    type: str  # ADDED | MODIFIED | DELETED
    resource: Resource
    namespace: str
    obj: dict[str, Any]


class ObjectStore:
    """All objects of the simulated cluster, guarded by one lock, with a bounded event history."""

    def __init__(self, *, watch_history: int = 10_000) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self._objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self._rv = 1000
        self._events: deque[WatchEvent] = deque(maxlen=watch_history)
        self._listeners: list[Callable[[WatchEvent], None]] = []

    # -- reading ---------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        return self._rv

    def get(self, resource: Resource, namespace: str, name: str) -> dict[str, Any]:
        with self.lock:
            obj = self._objects.get((resource.plural, namespace, name))
            if obj is None:
                raise not_found(resource, name)
            return copy.deepcopy(obj)

    def find(self, resource: Resource, namespace: str, name: str) -> dict[str, Any] | None:
        with self.lock:
            obj = self._objects.get((resource.plural, namespace, name))
            return copy.deepcopy(obj) if obj is not None else None

    def list(self, resource: Resource, namespace: str | None = None) -> list[dict[str, Any]]:
        """Objects of a kind (in one namespace, or all), sorted by namespace/name like etcd."""
        with self.lock:
            keys = sorted(
                key
                for key in self._objects
                if key[0] == resource.plural and (namespace is None or key[1] == namespace)
            )
            return [copy.deepcopy(self._objects[key]) for key in keys]

    def oldest_watchable(self) -> int:
        """The oldest resourceVersion a watch may start from (older ⇒ 410 Gone)."""
        with self.lock:
            if self._events.maxlen and len(self._events) == self._events.maxlen:
                return self._events[0].resource_version
            return 0

    def events_since(self, resource_version: int) -> list[WatchEvent]:
        with self.lock:
            return [event for event in self._events if event.resource_version > resource_version]

    def wait_for_change(self, after: int, timeout: float) -> None:
        with self.changed:
            if self._rv <= after:
                self.changed.wait(timeout)

    def subscribe(self, listener: Callable[[WatchEvent], None]) -> None:
        """Called (under the store lock) after every write: the controllers' informer."""
        self._listeners.append(listener)

    # -- writing ---------------------------------------------------------------------------

    def _bump(self, resource: Resource, event_type: str, obj: dict[str, Any]) -> None:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        namespace = obj["metadata"].get("namespace", "")
        event = WatchEvent(self._rv, event_type, resource, namespace, copy.deepcopy(obj))
        self._events.append(event)
        self.changed.notify_all()
        for listener in self._listeners:
            listener(event)

    def create(
        self, resource: Resource, namespace: str, obj: dict[str, Any], *, uid: str | None = None
    ) -> dict[str, Any]:
        obj = copy.deepcopy(obj)
        obj["apiVersion"], obj["kind"] = resource.api_version, resource.kind
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = f"{meta['generateName']}{uuid.uuid4().hex[:5]}"
        validate_object(resource, obj)
        name = meta["name"]
        with self.lock:
            if resource.namespaced:
                meta["namespace"] = namespace
                if ("namespaces", "", namespace) not in self._objects:
                    raise ApiError(
                        404,
                        "NotFound",
                        f'namespaces "{namespace}" not found',
                        details={"name": namespace, "kind": "namespaces"},
                    )
            else:
                meta.pop("namespace", None)
            key = (resource.plural, namespace if resource.namespaced else "", name)
            if key in self._objects:
                raise ApiError(
                    409,
                    "AlreadyExists",
                    f'{_qualified(resource)} "{name}" already exists',
                    details=_details(resource, name),
                )
            meta["uid"] = uid or str(uuid.uuid4())
            meta["creationTimestamp"] = now_rfc3339()
            meta.pop("deletionTimestamp", None)
            meta.pop("resourceVersion", None)
            if resource.plural == "jobs" or resource.plural == "deployments":
                meta["generation"] = 1
            self._objects[key] = obj
            self._bump(resource, "ADDED", obj)
            return copy.deepcopy(obj)

    def replace(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        obj: dict[str, Any],
        *,
        check_version: bool = True,
    ) -> dict[str, Any]:
        """PUT semantics: optimistic concurrency on ``metadata.resourceVersion`` when given."""
        obj = copy.deepcopy(obj)
        obj["apiVersion"], obj["kind"] = resource.api_version, resource.kind
        validate_object(resource, obj)
        with self.lock:
            key = (resource.plural, namespace if resource.namespaced else "", name)
            current = self._objects.get(key)
            if current is None:
                raise not_found(resource, name)
            meta = obj["metadata"]
            given = meta.get("resourceVersion")
            if check_version and given and given != current["metadata"]["resourceVersion"]:
                raise ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on {_qualified(resource)} "{name}": the '
                    "object has been modified; please apply your changes to the latest version "
                    "and try again",
                    details=_details(resource, name),
                )
            for field in ("uid", "creationTimestamp", "deletionTimestamp", "namespace"):
                if field in current["metadata"]:
                    meta[field] = current["metadata"][field]
                else:
                    meta.pop(field, None)
            if "generation" in current["metadata"]:
                changed = obj.get("spec") != current.get("spec")
                meta["generation"] = current["metadata"]["generation"] + int(changed)
            if resource.plural == "jobs" and "status" not in obj and "status" in current:
                obj["status"] = current["status"]
            self._objects[key] = obj
            self._bump(resource, "MODIFIED", obj)
            return copy.deepcopy(obj)

    def mutate(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        change: Callable[[dict[str, Any]], None],
    ) -> dict[str, Any] | None:
        """Controller-side in-place update (status writes); None when the object is gone."""
        with self.lock:
            obj = self._objects.get((resource.plural, namespace, name))
            if obj is None:
                return None
            before = copy.deepcopy(obj)
            change(obj)
            if obj != before:
                self._bump(resource, "MODIFIED", obj)
            return copy.deepcopy(obj)

    def remove(self, resource: Resource, namespace: str, name: str) -> dict[str, Any]:
        with self.lock:
            key = (resource.plural, namespace if resource.namespaced else "", name)
            obj = self._objects.pop(key, None)
            if obj is None:
                raise not_found(resource, name)
            self._bump(resource, "DELETED", obj)
            if resource.plural == "namespaces":
                for other in [k for k in self._objects if k[1] == name]:
                    gone = self._objects.pop(other)
                    self._bump(RESOURCES_BY_PLURAL[other[0]], "DELETED", gone)
            return copy.deepcopy(obj)

    def all_objects(self) -> Iterator[tuple[Resource, dict[str, Any]]]:
        with self.lock:
            for (plural, _namespace, _name), obj in sorted(self._objects.items()):
                yield RESOURCES_BY_PLURAL[plural], copy.deepcopy(obj)


RESOURCES_BY_PLURAL: dict[str, Resource] = {resource.plural: resource for resource in RESOURCES}
