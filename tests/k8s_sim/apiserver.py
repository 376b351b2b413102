"""The HTTP side of the simulated kube-apiserver: routing, auth, fault injection, verbs, watch.

Plain ``http.server`` (HTTP/1.1, chunked transfer for watches) on 127.0.0.1. Shapes follow
the real API server: ``Status`` objects for errors, ``<Kind>List`` with ``metadata.
resourceVersion`` for lists, ``{"type", "object"}`` lines for watches, a ``meta.k8s.io/v1``
``Table`` when kubectl asks for one.
"""

from __future__ import annotations

import base64
import copy
import json
import random
import socket
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import yaml

from .admission import apply_merge, default_object, fresh_managed_fields, leaves, record_manager
from .discovery import dra_resource_list, groups, openapi_v3, resource_list, version_info
from .selectors import field_matcher, label_matcher
from .store import (
    BY_GROUP_VERSION,
    ApiError,
    ObjectStore,
    Resource,
    invalid,
    not_found,
)
from .tables import table

if TYPE_CHECKING:
    from .kubelet import ControlPlane
    from .scenarios import Scenario

MAX_BODY_BYTES = 3 * 1024 * 1024  # kube-apiserver's request size limit
DEFAULT_WATCH_TIMEOUT_S = 1800.0


@dataclass(frozen=True)
class RequestRecord:
    """One served request: what was asked, the answer's status, when and for how long."""

    method: str
    path: str
    query: Mapping[str, str]
    status: int
    started: float  # time.monotonic() when the request arrived
    seconds: float  # until the answer began (a watch: its headers)


class ApiServer:
    """State shared by the handler threads: the store, the control plane, the fault dice."""

    def __init__(self, store: ObjectStore, control: ControlPlane, scenario: Scenario) -> None:
        self.store, self.control, self.scenario = store, control, scenario
        self.request_log: list[RequestRecord] = []
        self.stopping = threading.Event()
        self._fault_lock = threading.Lock()
        self._fault_seen = 0
        self._watch_count = 0
        # Seeded dice for simulated faults (not security): a test sees the same faults each run.
        seed = scenario.api_faults.seed if scenario.api_faults else 0
        self._random = random.Random(seed)  # noqa: S311

    def injected_fault(self, method: str, path: str) -> ApiError | None:
        faults = self.scenario.api_faults
        if faults is None or (faults.path_contains and faults.path_contains not in path):
            return None
        if faults.methods and method not in faults.methods:
            return None
        with self._fault_lock:
            self._fault_seen += 1
            fail = self._fault_seen <= faults.first_n or self._random.random() < faults.probability
        if not fail:
            return None
        if faults.status == 429:
            return ApiError(
                429,
                "TooManyRequests",
                "Too many requests, please try again later.",
                details={"retryAfterSeconds": faults.retry_after_s},
                headers={"Retry-After": str(faults.retry_after_s)},
            )
        if faults.status == 503:
            return ApiError(
                503,
                "ServiceUnavailable",
                "the server is currently unable to handle the request (simulated)",
            )
        return ApiError(
            faults.status,
            "InternalError",
            "Internal error occurred: etcdserver: request timed out (simulated)",
            details={"causes": [{"message": "etcdserver: request timed out (simulated)"}]},
        )

    def next_watch_number(self) -> int:
        with self._fault_lock:
            self._watch_count += 1
            return self._watch_count


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up (a closed watch, a killed worker) is normal, not a traceback.
        error = sys.exc_info()[1]
        if not isinstance(error, OSError):
            super().handle_error(request, client_address)


def make_http_server(api: ApiServer, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    handler = type("SimHandler", (_Handler,), {"api": api})
    server = _Server((host, 0), handler)
    server.daemon_threads = True
    return server


# -- the handler -------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    api: ApiServer

    def setup(self) -> None:
        super().setup()
        # Like Go's net/http: no Nagle, or each answer (headers and body are two writes) waits
        # ~40 ms for the client's delayed ACK.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # tests read .requests instead of stderr noise

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    # -- plumbing --------------------------------------------------------------------------

    def _serve(self, method: str) -> None:
        url = urlsplit(self.path)
        path = url.path.rstrip("/") or "/"
        query = {key: values[-1] for key, values in parse_qs(url.query).items()}
        self._request = (method, path, query, time.monotonic())
        self._recorded = False
        try:
            body = self._read_body()
            if path not in ("/healthz", "/livez", "/readyz"):
                self._authenticate()
                if fault := self.api.injected_fault(method, path):
                    raise fault
            self._route(method, path, query, body)
        except ApiError as error:
            self._send_json(error.code, error.status(), error.headers)
        except OSError:  # the client hung up (broken pipe, reset, TLS EOF): nothing to answer
            self.close_connection = True
        except Exception as error:
            self.api.control.bugs.append(traceback.format_exc())
            self._send_json(
                500, ApiError(500, "InternalError", f"simulator bug: {error!r}").status()
            )
        finally:
            if not self._recorded:  # the client went away before any answer
                self._record(0)

    def _record(self, status: int) -> None:
        """Log the request as its answer starts, so a client that has the answer sees it logged."""
        method, path, query, started = self._request
        self.api.request_log.append(
            RequestRecord(method, path, query, status, started, time.monotonic() - started)
        )
        self._recorded = True

    def _read_body(self) -> bytes:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError as error:
            self.close_connection = True
            raise ApiError(400, "BadRequest", "invalid Content-Length") from error
        if length > MAX_BODY_BYTES:
            self.close_connection = True
            raise ApiError(
                413, "RequestEntityTooLarge", "Request entity too large: limit is 3145728"
            )
        return self.rfile.read(length) if length else b""

    def _authenticate(self) -> None:
        header = self.headers.get("Authorization", "")
        if header != f"Bearer {self.api.scenario.token}":
            raise ApiError(401, "Unauthorized", "Unauthorized")

    def _send_json(self, code: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
        self._send(code, json.dumps(payload).encode(), "application/json", headers)

    def _send(
        self, code: int, data: bytes, content_type: str, headers: Mapping[str, str] | None = None
    ) -> None:
        self._record(code)
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Audit-Id", str(uuid.uuid4()))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _parse_body(self, body: bytes, resource: Resource) -> dict[str, Any]:
        try:
            content_type = self.headers.get("Content-Type", "")
            parsed = (
                yaml.safe_load(body.decode())
                if "yaml" in content_type
                else json.loads(body.decode() or "null")
            )
        except (ValueError, yaml.YAMLError) as error:
            raise ApiError(
                400,
                "BadRequest",
                f"the body of the request was in an unknown format "
                f"- accepted media types include: application/json, application/yaml: "
                f"{str(error).splitlines()[0]}",
            ) from error
        if not isinstance(parsed, dict):
            raise ApiError(400, "BadRequest", "the body of the request must be an object")
        if parsed.get("kind") not in (None, resource.kind) or parsed.get("apiVersion") not in (
            None,
            resource.api_version,
        ):
            raise ApiError(
                400,
                "BadRequest",
                f"the API version in the data ({parsed.get('apiVersion')}) does not match the "
                f"expected API version ({resource.api_version})",
            )
        parsed.setdefault("metadata", {})
        if not isinstance(parsed["metadata"], dict):
            raise ApiError(400, "BadRequest", "metadata must be an object")
        return parsed

    # -- routing ---------------------------------------------------------------------------

    def _route(self, method: str, path: str, query: dict[str, str], body: bytes) -> None:
        scenario = self.api.scenario
        if path in ("/healthz", "/livez", "/readyz"):
            return self._send(200, b"ok", "text/plain; charset=utf-8")
        if path == "/version":
            return self._send_json(200, version_info(scenario))
        if path == "/api":
            return self._send_json(
                200,
                {
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [
                        {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:443"}
                    ],
                },
            )
        if path == "/apis":
            return self._send_json(
                200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups(scenario)}
            )
        if path == "/openapi/v3" or path.startswith("/openapi/v3/"):
            return self._send_json(200, openapi_v3(path.removeprefix("/openapi/v3").strip("/")))
        parts = path.strip("/").split("/")
        if parts[0] == "api" and len(parts) >= 2:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) == 2:
            for entry in groups(scenario):
                if entry["name"] == parts[1]:
                    return self._send_json(200, {"kind": "APIGroup", "apiVersion": "v1", **entry})
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        elif parts[0] == "apis" and len(parts) >= 3:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        resources = BY_GROUP_VERSION.get((group, version))
        if group == "resource.k8s.io" and version in scenario.resource_api_versions and not rest:
            return self._send_json(200, dra_resource_list(version))
        if resources is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not rest:
            if method != "GET":
                raise ApiError(405, "MethodNotAllowed", "the server does not allow this method")
            return self._send_json(200, resource_list(group, version))
        namespace = ""
        if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] in resources:
            namespace, rest = rest[1], rest[2:]
            if not resources[rest[0]].namespaced:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
        resource = resources.get(rest[0])
        if resource is None or len(rest) > 3:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) >= 2 else ""
        sub = rest[2] if len(rest) == 3 else ""
        if resource.namespaced and name and not namespace:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if sub and not (sub == "status" or (sub == "log" and resource.plural == "pods")):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if sub == "log":
            if method != "GET":
                raise ApiError(405, "MethodNotAllowed", "the server does not allow this method")
            return self._pod_log(namespace, name, query)
        if method == "GET" and not name:
            if query.get("watch") in ("true", "True", "1"):
                return self._watch(resource, namespace, query)
            return self._list(resource, namespace, query)
        if method == "GET":
            return self._send_json(200, self.api.store.get(resource, namespace, name))
        if method == "POST" and not name:
            return self._create(resource, namespace, body, query)
        if method == "PUT" and name:
            return self._replace(resource, namespace, name, body, status_only=sub == "status")
        if method == "PATCH" and name:
            return self._patch(resource, namespace, name, body, query)
        if method == "DELETE" and name:
            return self._delete(resource, namespace, name, body, query)
        raise ApiError(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )

    # -- verbs -----------------------------------------------------------------------------

    def _matching(self, resource: Resource, namespace: str, query: Mapping[str, str]) -> Any:
        try:
            labels = label_matcher(query.get("labelSelector"))
            fields = field_matcher(query.get("fieldSelector"), resource.field_labels)
        except ValueError as error:
            raise ApiError(400, "BadRequest", f"unable to parse requirement: {error}") from error
        return lambda obj: (
            (not namespace or obj["metadata"].get("namespace") == namespace)
            and labels(obj)
            and fields(obj)
        )

    def _list(self, resource: Resource, namespace: str, query: Mapping[str, str]) -> None:
        matches = self._matching(resource, namespace, query)
        store = self.api.store
        with store.lock:
            rv = str(store.resource_version)
            items = [obj for obj in store.list(resource, namespace or None) if matches(obj)]
        start = 0
        if token := query.get("continue"):
            try:
                decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
                start, rv = int(decoded["start"]), str(decoded["rv"])
            except (ValueError, KeyError, TypeError) as error:
                raise ApiError(400, "BadRequest", "continue key is not valid") from error
        metadata: dict[str, Any] = {"resourceVersion": rv}
        limit = int(query.get("limit") or 0)
        page = items[start:]
        if limit and len(page) > limit:
            page = page[:limit]
            metadata["continue"] = base64.urlsafe_b64encode(
                json.dumps({"start": start + limit, "rv": rv}).encode()
            ).decode()
            metadata["remainingItemCount"] = len(items) - start - limit
        if "as=Table" in self.headers.get("Accept", ""):
            return self._send_json(200, table(resource, page, rv))
        for item in page:
            item.pop("apiVersion", None)
            item.pop("kind", None)
        self._send_json(
            200,
            {
                "kind": f"{resource.kind}List",
                "apiVersion": resource.api_version,
                "metadata": metadata,
                "items": page,
            },
        )

    def _create(
        self, resource: Resource, namespace: str, body: bytes, query: Mapping[str, str]
    ) -> None:
        obj = self._parse_body(body, resource)
        if resource.plural in ("jobs", "pods"):
            obj.pop("status", None)
        if resource.plural == "namespaces":
            obj["status"] = {"phase": "Active"}
            obj["spec"] = {"finalizers": ["kubernetes"]}
        # Jobs: the defaulted selector carries the uid the object is about to get.
        uid = str(uuid.uuid4())
        default_object(resource, obj, uid)
        if query.get("dryRun") == "All":
            obj["metadata"]["uid"] = uid
            return self._send_json(201, obj)
        fresh_managed_fields(obj, resource, query.get("fieldManager") or _agent(self), "Update")
        self._send_json(201, self.api.store.create(resource, namespace, obj, uid=uid))

    def _replace(
        self, resource: Resource, namespace: str, name: str, body: bytes, *, status_only: bool
    ) -> None:
        obj = self._parse_body(body, resource)
        if obj["metadata"].get("name") not in (None, name):
            raise ApiError(
                400, "BadRequest", "the name of the object does not match the name on the URL"
            )
        obj["metadata"]["name"] = name
        current = self.api.store.get(resource, namespace, name)
        if status_only:
            merged = copy.deepcopy(current)
            merged["status"] = obj.get("status", {})
            merged["metadata"]["resourceVersion"] = obj["metadata"].get("resourceVersion")
            obj = merged
        elif resource.plural in ("jobs", "pods"):
            obj["status"] = current.get("status", {})
        default_object(resource, obj, current["metadata"]["uid"])
        self._check_immutable(resource, current, obj)
        obj["metadata"]["managedFields"] = current["metadata"].get("managedFields") or []
        record_manager(obj, _agent(self), "Update")
        self._send_json(200, self.api.store.replace(resource, namespace, name, obj))

    def _check_immutable(
        self, resource: Resource, current: Mapping[str, Any], new: Mapping[str, Any]
    ) -> None:
        if resource.plural != "jobs":
            return
        for field in ("template", "selector", "completionMode"):
            if current["spec"].get(field) != new["spec"].get(field):
                raise invalid(
                    resource,
                    current["metadata"]["name"],
                    [(f"spec.{field}", "Invalid value: field is immutable")],
                )

    def _patch(
        self, resource: Resource, namespace: str, name: str, body: bytes, query: Mapping[str, str]
    ) -> None:
        content_type = self.headers.get("Content-Type", "").split(";")[0].strip()
        store = self.api.store
        if content_type == "application/apply-patch+yaml":
            manager = query.get("fieldManager")
            if not manager:
                raise ApiError(
                    422,
                    "Invalid",
                    'PatchOptions.meta.k8s.io "" is invalid: '
                    "fieldManager: Required value: is required for apply patch",
                )
            applied = self._parse_body(body, resource)
            if applied.get("kind") is None or applied.get("apiVersion") is None:
                raise ApiError(400, "BadRequest", "apiVersion and kind are required for apply")
            if applied["metadata"].get("name") not in (None, name):
                raise ApiError(
                    400, "BadRequest", "the name of the object does not match the name on the URL"
                )
            applied["metadata"]["name"] = name
            force = query.get("force") in ("true", "True", "1")
            with store.lock:
                current = store.find(resource, namespace if resource.namespaced else "", name)
                if current is None:
                    obj = copy.deepcopy(applied)
                    if resource.plural in ("jobs", "pods"):
                        obj.pop("status", None)
                    if resource.plural == "namespaces":
                        obj["status"] = {"phase": "Active"}
                        obj["spec"] = {"finalizers": ["kubernetes"]}
                    uid = str(uuid.uuid4())
                    default_object(resource, obj, uid)
                    fresh_managed_fields(obj, resource, manager, "Apply")
                    if query.get("dryRun") == "All":
                        return self._send_json(201, obj)
                    return self._send_json(201, store.create(resource, namespace, obj, uid=uid))
                if not force:
                    self._apply_conflicts(resource, current, applied, manager)
                patch = {k: v for k, v in applied.items() if k not in ("status",)}
                patch["metadata"] = {
                    k: v
                    for k, v in applied["metadata"].items()
                    if k in ("labels", "annotations", "finalizers")
                }
                merged = apply_merge(copy.deepcopy(current), patch)
                default_object(resource, merged, current["metadata"]["uid"])
                self._check_immutable(resource, current, merged)
                record_manager(merged, manager, "Apply")
                merged["metadata"].pop("resourceVersion", None)
                if query.get("dryRun") == "All":
                    return self._send_json(200, merged)
                return self._send_json(200, store.replace(resource, namespace, name, merged))
        if content_type in (
            "application/merge-patch+json",
            "application/strategic-merge-patch+json",
        ):
            # Strategic merge is treated as JSON merge patch: lists replace (simplification).
            try:
                patch = json.loads(body.decode() or "{}")
            except ValueError as error:
                raise ApiError(400, "BadRequest", f"invalid JSON patch: {error}") from error
            if not isinstance(patch, dict):
                raise ApiError(400, "BadRequest", "the patch must be an object")
            with store.lock:
                current = store.get(resource, namespace, name)
                merged = apply_merge(copy.deepcopy(current), patch)
                default_object(resource, merged, current["metadata"]["uid"])
                self._check_immutable(resource, current, merged)
                record_manager(merged, query.get("fieldManager") or _agent(self), "Update")
                return self._send_json(200, store.replace(resource, namespace, name, merged))
        raise ApiError(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types "
            "include: application/json-patch+json, application/merge-patch+json, "
            "application/apply-patch+yaml, application/strategic-merge-patch+json",
        )

    def _apply_conflicts(
        self,
        resource: Resource,
        current: Mapping[str, Any],
        applied: Mapping[str, Any],
        manager: str,
    ) -> None:
        others = [
            entry["manager"]
            for entry in current["metadata"].get("managedFields") or []
            if entry.get("manager") != manager
        ]
        if not others:
            return
        have = leaves({k: v for k, v in current.items() if k not in ("metadata", "status")})
        want = leaves(
            {
                k: v
                for k, v in applied.items()
                if k not in ("metadata", "status", "kind", "apiVersion")
            }
        )
        conflicts = sorted(
            path for path, value in want.items() if path in have and have[path] != value
        )
        if conflicts:
            raise ApiError(
                409,
                "Conflict",
                f"Apply failed with {len(conflicts)} conflict{'s' if len(conflicts) > 1 else ''}: "
                + "; ".join(f'conflict with "{others[0]}": {path}' for path in conflicts),
                details={
                    "name": current["metadata"]["name"],
                    "kind": resource.plural,
                    "causes": [
                        {
                            "reason": "FieldManagerConflict",
                            "field": path,
                            "message": f'conflict with "{others[0]}"',
                        }
                        for path in conflicts
                    ],
                },
            )

    def _delete(
        self, resource: Resource, namespace: str, name: str, body: bytes, query: Mapping[str, str]
    ) -> None:
        options: dict[str, Any] = {}
        if body:
            try:
                options = json.loads(body.decode()) or {}
            except ValueError as error:
                raise ApiError(400, "BadRequest", f"invalid DeleteOptions: {error}") from error
        policy = query.get("propagationPolicy") or options.get("propagationPolicy")
        if options.get("orphanDependents") is True and not policy:
            policy = "Orphan"
        if policy not in (None, "Foreground", "Background", "Orphan"):
            raise ApiError(
                422,
                "Invalid",
                f'DeleteOptions.meta.k8s.io "" is invalid: '
                f'propagationPolicy: Unsupported value: "{policy}"',
            )
        store, control = self.api.store, self.api.control
        current = store.get(resource, namespace, name)
        if current["metadata"].get("deletionTimestamp"):
            return self._send_json(200 if resource.plural == "jobs" else 202, current)
        if resource.plural == "jobs":
            remaining = control.delete_job(namespace, name, policy or "Orphan")
            if remaining is not None:
                return self._send_json(200, remaining)
        elif resource.plural == "pods":
            control.delete_pod(namespace, name)
            pod = store.find(resource, namespace, name)
            if pod is not None:
                return self._send_json(200, pod)
        else:
            store.remove(resource, namespace if resource.namespaced else "", name)
        details = {"name": name, "kind": resource.plural, "uid": current["metadata"]["uid"]}
        if resource.group:
            details["group"] = resource.group
        self._send_json(
            200,
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": details,
            },
        )

    def _pod_log(self, namespace: str, name: str, query: Mapping[str, str]) -> None:
        pods = BY_GROUP_VERSION[("", "v1")]["pods"]
        pod = self.api.store.find(pods, namespace, name)
        if pod is None:
            raise not_found(pods, name)
        containers = [c["name"] for c in pod["spec"].get("containers") or []]
        container = query.get("container")
        if not container:
            if len(containers) != 1:
                raise ApiError(
                    400,
                    "BadRequest",
                    f"a container name must be specified for pod "
                    f"{name}, choose one of: [{' '.join(containers)}]",
                )
            container = containers[0]
        if container not in containers:
            raise ApiError(400, "BadRequest", f"container {container} is not valid for pod {name}")
        if query.get("previous") in ("true", "True", "1"):
            raise ApiError(
                400,
                "BadRequest",
                f'previous terminated container "{container}" in pod "{name}" not found',
            )
        state: Mapping[str, Any] = {}
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            if status.get("name") == container:
                state = status.get("state") or {}
        if "waiting" in state or not state:
            reason = (state.get("waiting") or {}).get("reason", "ContainerCreating")
            if reason in ("ImagePullBackOff", "ErrImagePull"):
                reason = "trying and failing to pull image"
            raise ApiError(
                400,
                "BadRequest",
                f'container "{container}" in pod "{name}" is waiting to start: {reason}',
            )
        data = self.api.control.logs.get((namespace, name, container), b"")
        if tail := query.get("tailLines"):
            lines = data.splitlines(keepends=True)
            data = b"".join(lines[-int(tail) :]) if int(tail) > 0 else b""
        if limit := query.get("limitBytes"):
            data = data[: int(limit)]
        self._send(200, data, "text/plain")

    # -- watch -----------------------------------------------------------------------------

    def _watch(self, resource: Resource, namespace: str, query: Mapping[str, str]) -> None:
        api, store = self.api, self.api.store
        matches = self._matching(resource, namespace, query)
        faults = api.scenario.watch_faults
        number = api.next_watch_number()
        rv_text = query.get("resourceVersion") or ""
        try:
            since = int(rv_text) if rv_text not in ("", "0") else None
        except ValueError as error:
            raise ApiError(400, "BadRequest", f"invalid resource version: {rv_text}") from error
        self._record(200)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def chunk(payload: Mapping[str, Any]) -> None:
            data = json.dumps(payload).encode() + b"\n"
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        timeout = float(query.get("timeoutSeconds") or DEFAULT_WATCH_TIMEOUT_S)
        if faults and faults.max_seconds is not None:
            timeout = min(timeout, faults.max_seconds)
        ends = time.monotonic() + timeout
        sent = 0
        try:
            gone = since is not None and (
                since < store.oldest_watchable()
                or (faults is not None and faults.gone_every and number % faults.gone_every == 0)
            )
            if gone:
                chunk(
                    {
                        "type": "ERROR",
                        "object": {
                            "kind": "Status",
                            "apiVersion": "v1",
                            "metadata": {},
                            "status": "Failure",
                            "message": (
                                f"too old resource version: {since} ({store.resource_version})"
                            ),
                            "reason": "Expired",
                            "code": 410,
                        },
                    }
                )
                return
            with store.lock:
                if since is None:
                    cursor = store.resource_version
                    initial = [
                        obj for obj in store.list(resource, namespace or None) if matches(obj)
                    ]
                else:
                    cursor, initial = since, []
            pending = [{"type": "ADDED", "object": obj} for obj in initial]
            while not api.stopping.is_set():
                for event in store.events_since(cursor):
                    cursor = event.resource_version
                    if event.resource.plural == resource.plural and matches(event.obj):
                        pending.append({"type": event.type, "object": event.obj})
                for event in pending:
                    chunk(event)
                    sent += 1
                    if faults and faults.max_events is not None and sent >= faults.max_events:
                        return
                pending = []
                remaining = ends - time.monotonic()
                if remaining <= 0:
                    if query.get("allowWatchBookmarks") in ("true", "True", "1"):
                        # Like the apiserver right before a watch times out: where it got to.
                        chunk(
                            {
                                "type": "BOOKMARK",
                                "object": {
                                    "kind": resource.kind,
                                    "apiVersion": resource.api_version,
                                    "metadata": {"resourceVersion": str(cursor)},
                                },
                            }
                        )
                    return
                store.wait_for_change(cursor, min(remaining, 0.25))
        finally:
            try:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:
                self.close_connection = True


def _agent(handler: _Handler) -> str:
    agent = handler.headers.get("User-Agent", "unknown")
    return agent.split("/")[0] or "unknown"
