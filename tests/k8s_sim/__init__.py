"""A simulated Kubernetes API server for the validation-run tests and bench/ (no Django).

No kube-apiserver can run here, so this is a faithful stand-in for the part of the API that
AICR's orchestrator (our port) and ``kubectl`` use, with a simulated control plane whose kubelet
plays AICR's snapshot agent and validator containers from a ``Scenario``::

    with SimulatedCluster(SCENARIOS["healthy-h100-eks"]) as cluster:
        api = kubernetes.config.new_client_from_config_dict(yaml.safe_load(cluster.kubeconfig))
        cluster.objects("Job", "aicr-validation")
        cluster.requests            # [(method, path), ...]

Everything it reports is SIMULATED: node names, versions, logs and timings are invented.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import socket
import threading
import uuid
from types import TracebackType
from typing import Any

import yaml

from .apiserver import ApiServer, RequestRecord, make_http_server
from .containers import CATALOG_CHECKS
from .kubelet import ControlPlane
from .scenarios import SCENARIOS, ApiFaults, HugeLogs, Node, Scenario, WatchFaults
from .snapshot import node_labels
from .store import BY_KIND, RESOURCES_BY_PLURAL, ApiError, ObjectStore, Resource
from .tls import issue_server_certificate

__all__ = [
    "CATALOG_CHECKS",
    "SCENARIOS",
    "ApiFaults",
    "HugeLogs",
    "Node",
    "RequestRecord",
    "Scenario",
    "SimulatedCluster",
    "SimulatorBug",
    "WatchFaults",
]

# Namespaces a cluster of the scenario has before anyone connects, by installed component.
_COMPONENT_NAMESPACES = {
    "gpu-operator": "gpu-operator",
    "nvidia-dra-driver-gpu": "nvidia-dra-driver",
    "kube-prometheus-stack": "monitoring",
    "kai-scheduler": "kai-scheduler",
    "kubeflow-trainer": "kubeflow",
    "cert-manager": "cert-manager",
    "nvsentinel": "nvsentinel",
    "nodewright-operator": "skyhook",
    "nfd": "node-feature-discovery",
}


class SimulatorBug(AssertionError):
    """The simulator itself failed (a traceback from a handler or the control plane)."""


class SimulatedCluster:
    """One simulated cluster: an HTTP server on 127.0.0.1 (random port) in its own thread."""

    def __init__(
        self, scenario: Scenario | str, *, tls: bool = False, host: str = "127.0.0.1"
    ) -> None:
        """``tls``: serve https with a throwaway CA (in the kubeconfig); kubectl needs it, since
        client-go sends bearer tokens only over TLS. ``host``: another loopback address to
        listen on (the multi-host test's simulator host, tests/deploy/)."""
        self.host = host
        self.scenario = SCENARIOS[scenario] if isinstance(scenario, str) else scenario
        self.certificate = issue_server_certificate() if tls else None
        self.store = ObjectStore(watch_history=self.scenario.watch_history)
        self.control = ControlPlane(self.store, self.scenario)
        self._api = ApiServer(self.store, self.control, self.scenario)
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.url = ""

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> SimulatedCluster:
        self._seed()
        if self.scenario.unreachable:
            # Bind, learn a free port, close it: nothing listens there afterwards.
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                port = probe.getsockname()[1]
            self.url = f"{self._scheme}://127.0.0.1:{port}"
            return self
        self.control.start()
        self._server = make_http_server(self._api, host=self.host)
        if self.certificate is not None:
            # Handshake lazily in the handler thread, not in the accept loop.
            self._server.socket = self.certificate.server_context().wrap_socket(
                self._server.socket, server_side=True, do_handshake_on_connect=False
            )
        self.url = f"{self._scheme}://{self.host}:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"k8s-sim-{self.scenario.name}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._api.stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self.control.stop()
            self._server = None

    def __enter__(self) -> SimulatedCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        if self.control.bugs and exc_type is None:
            # A bug in the simulator must fail the test, not pass as a cluster fault.
            raise SimulatorBug("\n".join(self.control.bugs))

    # -- what tests read -------------------------------------------------------------------

    @property
    def kubeconfig(self) -> str:
        """A kubeconfig for the simulator: http (or https) on loopback, bearer-token auth."""
        name = f"sim-{self.scenario.name}"
        cluster: dict[str, str] = {"server": self.url}
        if self.certificate is not None:
            cluster["certificate-authority-data"] = base64.b64encode(
                self.certificate.ca_pem
            ).decode()
        return yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": name, "cluster": cluster}],
                "users": [{"name": f"{name}-admin", "user": {"token": self.scenario.token}}],
                "contexts": [{"name": name, "context": {"cluster": name, "user": f"{name}-admin"}}],
                "current-context": name,
            },
            sort_keys=False,
        )

    def objects(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """What exists now; ``kind`` is a Kind (``Job``) or a plural (``jobs``)."""
        resource = _resource(kind)
        return self.store.list(resource, namespace if resource.namespaced else None)

    @property
    def _scheme(self) -> str:
        return "https" if self.certificate is not None else "http"

    @property
    def requests(self) -> list[tuple[str, str]]:
        """(method, path) of every request served so far, without the query string."""
        return [(record.method, record.path) for record in self._api.request_log]

    @property
    def request_log(self) -> list[RequestRecord]:
        """Every request with its query parameters and answer status."""
        return list(self._api.request_log)

    def pod_log(self, namespace: str, pod: str, container: str) -> bytes:
        return self.control.logs.get((namespace, pod, container), b"")

    # -- initial state ---------------------------------------------------------------------

    def _seed(self) -> None:
        namespaces = ["default", "kube-system", "kube-public", "kube-node-lease"]
        namespaces += [
            namespace
            for component, namespace in _COMPONENT_NAMESPACES.items()
            if component in self.scenario.components
        ]
        for namespace in namespaces:
            self.store.create(
                RESOURCES_BY_PLURAL["namespaces"],
                "",
                _namespace(namespace),
            )
            for name in ("default",):
                self.store.create(
                    RESOURCES_BY_PLURAL["serviceaccounts"], namespace, {"metadata": {"name": name}}
                )
        if self.scenario.registry_secret:
            self._seed_pull_secret()
        gpu_allocatable = {node.name for node in self.scenario.gpu_nodes()}
        for node in self.scenario.nodes:
            capacity = {
                "cpu": "192",
                "memory": "2097152000Ki",
                "pods": "110",
                "ephemeral-storage": "1048576000Ki",
            }
            if node.gpus == 0:
                capacity.update(cpu="8", memory="32386488Ki")
            allocatable = dict(capacity)
            if node.name in gpu_allocatable:
                capacity["nvidia.com/gpu"] = allocatable["nvidia.com/gpu"] = str(node.gpus)
            scenario = self.scenario
            self.store.create(
                RESOURCES_BY_PLURAL["nodes"],
                "",
                {
                    "metadata": {"name": node.name, "labels": node_labels(scenario, node)},
                    "spec": {
                        "providerID": f"aws:///{node.zone}/{node.name.split('.')[0]}",
                        "unschedulable": node.unschedulable,
                        "taints": [dict(taint) for taint in node.taints],
                    },
                    "status": {
                        "capacity": capacity,
                        "allocatable": allocatable,
                        "conditions": [
                            {
                                "type": "Ready",
                                "status": "True",
                                "reason": "KubeletReady",
                                "message": "kubelet is posting ready status",
                            }
                        ],
                        "addresses": [{"type": "Hostname", "address": node.name}],
                        "nodeInfo": {
                            "kubeletVersion": scenario.kubernetes_version,
                            "kernelVersion": scenario.kernel,
                            "osImage": scenario.os_release.get("PRETTY_NAME", ""),
                            "containerRuntimeVersion": scenario.container_runtime,
                            "operatingSystem": "linux",
                            "architecture": "amd64",
                            "kubeProxyVersion": "",  # deprecated, empty on current kubelets
                            "bootID": _stable_uuid(node.name, "boot"),
                            "machineID": _stable_uuid(node.name, "machine").replace("-", ""),
                            "systemUUID": _stable_uuid(node.name, "system"),
                        },
                    },
                },
            )

    def _seed_pull_secret(self) -> None:
        """The namespace and registry Secret a maintainer creates before running AICR."""
        namespace, scenario = self.scenario.secret_namespace, self.scenario
        with contextlib.suppress(ApiError):  # a seeded namespace of the same name
            self.store.create(
                RESOURCES_BY_PLURAL["namespaces"],
                "",
                _namespace(namespace),
            )
        host = scenario.private_registry.split("/")[0]
        auth = base64.b64encode(b"robot:simulated-password").decode()
        config = json.dumps({"auths": {host: {"auth": auth}}}).encode()
        self.store.create(
            RESOURCES_BY_PLURAL["secrets"],
            namespace,
            {
                "metadata": {"name": scenario.registry_secret},
                "type": "kubernetes.io/dockerconfigjson",
                "data": {".dockerconfigjson": base64.b64encode(config).decode()},
            },
        )


def _namespace(name: str) -> dict[str, Any]:
    """A namespace as the API server holds one (the name label is set by admission)."""
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def _stable_uuid(*parts: str) -> str:
    return str(uuid.UUID(hashlib.sha256("/".join(parts).encode()).hexdigest()[:32]))


def _resource(kind: str) -> Resource:
    if kind in BY_KIND:
        return BY_KIND[kind]
    if kind in RESOURCES_BY_PLURAL:
        return RESOURCES_BY_PLURAL[kind]
    raise KeyError(f"the simulator has no kind {kind!r}")
