"""The simulated control plane behind the API: Job controller, scheduler, kubelet and garbage
collector, all in one thread driven by store events and timers.

Times: containers "run" for their simulated duration * ``scenario.time_scale`` of wall time
(at least ``min_container_wall_s``), while ``startedAt``/``finishedAt`` report the simulated
seconds; ``activeDeadlineSeconds`` is scaled the same way.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import re
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from . import containers, images
from .scenarios import Scenario
from .selectors import set_based_match_labels
from .snapshot import agent_node, node_labels, snapshot_yaml
from .store import RESOURCES_BY_PLURAL, ApiError, ObjectStore, WatchEvent

JOBS = RESOURCES_BY_PLURAL["jobs"]
PODS = RESOURCES_BY_PLURAL["pods"]
CONFIGMAPS = RESOURCES_BY_PLURAL["configmaps"]
SERVICEACCOUNTS = RESOURCES_BY_PLURAL["serviceaccounts"]
NODES = RESOURCES_BY_PLURAL["nodes"]
NAMESPACES = RESOURCES_BY_PLURAL["namespaces"]
SECRETS = RESOURCES_BY_PLURAL["secrets"]
EVENTS = RESOURCES_BY_PLURAL["events"]
# The scheduler's filters only refuse these effects; PreferNoSchedule just lowers a score.
_HARD_EFFECTS = ("NoSchedule", "NoExecute")
_UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}

_VALIDATOR_IMAGE = re.compile(r"aicr-validators/(deployment|performance|conformance)[:@]")
START_DELAY_SIM_S = 2.0  # scheduling + image pull of a cached image
GRACE_SIM_S = 1.0  # a terminating pod's shutdown
PULL_BACK_OFF_SIM_S = 10.0  # the kubelet's first image pull back-off


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _condition(kind: str, reason: str = "", message: str = "") -> dict[str, str]:
    now = rfc3339(datetime.now(UTC))
    condition = {"type": kind, "status": "True", "lastProbeTime": now, "lastTransitionTime": now}
    if reason:
        condition["reason"] = reason
    if message:
        condition["message"] = message
    return condition


class ControlPlane:
    def __init__(self, store: ObjectStore, scenario: Scenario) -> None:
        self.store = store
        self.scenario = scenario
        self.logs: dict[tuple[str, str, str], bytes] = {}
        # Jobs whose container finishes before activeDeadlineSeconds in simulated time: their
        # deadline timer must not fire just because a loaded machine ran the timers late.
        self._finishes_in_time: set[str] = set()
        self.bugs: list[str] = []  # tracebacks of simulator bugs (SimulatedCluster raises them)
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._wake = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._loop, name="k8s-sim-control", daemon=True)
        store.subscribe(self._on_event)

    # -- timer loop ------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._wake:
            self._stopped = True
            self._wake.notify_all()
        self._thread.join(timeout=5)

    def after(self, sim_seconds: float, action: Callable[[], None], *, floor: float = 0.0) -> None:
        delay = max(sim_seconds * self.scenario.time_scale, floor)
        with self._wake:
            heapq.heappush(self._timers, (time.monotonic() + delay, next(self._seq), action))
            self._wake.notify_all()

    def _loop(self) -> None:
        while True:
            with self._wake:
                while not self._stopped and (
                    not self._timers or self._timers[0][0] > time.monotonic()
                ):
                    timeout = self._timers[0][0] - time.monotonic() if self._timers else None
                    self._wake.wait(timeout)
                if self._stopped:
                    return
                _due, _seq, action = heapq.heappop(self._timers)
            try:
                action()
            except ApiError:
                pass  # an object changed or vanished under the controller: like a real one, move on
            except Exception:
                self.bugs.append(traceback.format_exc())

    def _on_event(self, event: WatchEvent) -> None:
        # Called under the store lock: only queue work, never write from here.
        if event.resource.plural == "jobs" and event.type == "ADDED":
            self.after(0, lambda: self._job_added(event.namespace, event.obj["metadata"]["name"]))
        elif event.resource.plural == "namespaces" and event.type == "ADDED":
            self.after(0, lambda: self._namespace_added(event.obj["metadata"]["name"]))
        elif (
            event.type == "MODIFIED"
            and event.obj["metadata"].get("deletionTimestamp")
            and event.resource.plural in ("jobs", "pods")
        ):
            self.after(
                0,
                lambda: self._finalize(
                    event.resource.plural, event.namespace, event.obj["metadata"]["name"]
                ),
            )

    # -- namespaces ------------------------------------------------------------------------

    def _namespace_added(self, namespace: str) -> None:
        # The service-account and root-CA controllers populate every new namespace.
        for resource, obj in (
            (SERVICEACCOUNTS, {"metadata": {"name": "default"}}),
            (
                CONFIGMAPS,
                {
                    "metadata": {"name": "kube-root-ca.crt"},
                    "data": {
                        "ca.crt": "-----BEGIN CERTIFICATE-----\nSIMULATED\n"
                        "-----END CERTIFICATE-----\n"
                    },
                },
            ),
        ):
            with contextlib.suppress(ApiError):  # already there (seeded namespaces)
                self.store.create(resource, namespace, obj)

    # -- Job controller --------------------------------------------------------------------

    def _job_added(self, namespace: str, name: str) -> None:
        job = self.store.find(JOBS, namespace, name)
        if job is None or job["spec"].get("suspend"):
            return
        started = datetime.now(UTC)

        def mark_started(obj: dict[str, Any]) -> None:
            obj.setdefault("status", {})["startTime"] = rfc3339(started)

        self.store.mutate(JOBS, namespace, name, mark_started)
        uid = job["metadata"]["uid"]
        deadline = job["spec"].get("activeDeadlineSeconds")
        if deadline:
            self.after(float(deadline), lambda: self._deadline(namespace, name, uid))
        self._create_pod(namespace, name, uid)

    def _job_live(self, namespace: str, name: str, uid: str) -> dict[str, Any] | None:
        job = self.store.find(JOBS, namespace, name)
        if job is None or job["metadata"]["uid"] != uid or job["metadata"].get("deletionTimestamp"):
            return None
        if _terminal(job):
            return None
        return job

    def _create_pod(self, namespace: str, job_name: str, uid: str) -> None:
        job = self._job_live(namespace, job_name, uid)
        if job is None:
            return
        template = job["spec"]["template"]
        sa = template["spec"].get("serviceAccountName") or "default"
        if self.store.find(SERVICEACCOUNTS, namespace, sa) is None:
            # Real API: pod creation is forbidden until the ServiceAccount exists; the Job
            # controller retries with backoff (and the deadline still runs).
            self.after(0.5, lambda: self._create_pod(namespace, job_name, uid), floor=0.01)
            return
        labels = dict(template.get("metadata", {}).get("labels") or {})
        pod = {
            "metadata": {
                "name": f"{job_name}-{uuid.uuid4().hex[:5]}",
                "labels": labels,
                "annotations": dict(template.get("metadata", {}).get("annotations") or {}),
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": job_name,
                        "uid": uid,
                        "controller": True,
                        "blockOwnerDeletion": True,
                    },
                ],
            },
            "spec": {**template["spec"], "serviceAccountName": sa},
            "status": {"phase": "Pending", "qosClass": "Guaranteed"},
        }
        node, refusal = self._schedule(pod["spec"])
        if node is None:
            pod["status"]["conditions"] = [
                {**_condition("PodScheduled", "Unschedulable", refusal), "status": "False"}
            ]
        else:
            pod["spec"]["nodeName"] = node
            pod["status"]["conditions"] = [_condition("PodScheduled")]
            pod["status"]["hostIP"] = "10.0.12.34"
            pod["status"]["startTime"] = rfc3339(datetime.now(UTC))
            pod["status"]["containerStatuses"] = [
                {
                    "name": c["name"],
                    "image": images.reported_image(self.scenario, c["image"]),
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "started": False,
                    "state": {"waiting": {"reason": "ContainerCreating"}},
                }
                for c in pod["spec"]["containers"]
            ]
        created = self.store.create(PODS, namespace, pod)
        if node is None:
            self._event(created, "Warning", "FailedScheduling", refusal, "default-scheduler")

        def mark_active(obj: dict[str, Any]) -> None:
            status = obj.setdefault("status", {})
            status["active"] = 1
            status["ready"] = 0
            status["terminating"] = 0
            status.setdefault("uncountedTerminatedPods", {})

        self.store.mutate(JOBS, namespace, job_name, mark_active)
        if node is not None:
            pod_name, pod_uid = created["metadata"]["name"], created["metadata"]["uid"]
            self.after(
                START_DELAY_SIM_S, lambda: self._start_container(namespace, pod_name, pod_uid)
            )

    def _schedule(self, spec: Mapping[str, Any]) -> tuple[str | None, str]:
        """kube-scheduler's filters in its order (NodeUnschedulable, TaintToleration,
        NodeAffinity): the chosen node, or None and FitError's message (reasons counted and
        sorted as strings, then the preemption verdict)."""
        if spec.get("nodeName"):
            return str(spec["nodeName"]), ""
        selector = spec.get("nodeSelector") or {}
        tolerations = spec.get("tolerations") or []
        candidates, refused = [], []
        for node in self.scenario.nodes:
            labels = node_labels(self.scenario, node)
            untolerated = next(
                (
                    taint
                    for taint in node.taints
                    if taint.get("effect") in _HARD_EFFECTS and not tolerates(tolerations, taint)
                ),
                None,
            )
            if node.unschedulable and not tolerates(tolerations, _UNSCHEDULABLE_TAINT):
                refused.append("node(s) were unschedulable")
            elif untolerated is not None:
                refused.append(
                    "node(s) had untolerated taint "
                    f"{{{untolerated['key']}: {untolerated.get('value', '')}}}"
                )
            elif any(labels.get(k) != v for k, v in selector.items()):
                refused.append("node(s) didn't match Pod's node affinity/selector")
            else:
                candidates.append((node, labels))
        if not candidates:
            total = len(self.scenario.nodes)
            reasons = sorted(f"{refused.count(r)} {r}" for r in dict.fromkeys(refused))
            return None, (
                f"0/{total} nodes are available: {', '.join(reasons)}. preemption: 0/{total} "
                f"nodes are available: {total} Preemption is not helpful for scheduling."
            )
        preferred = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "preferredDuringSchedulingIgnoredDuringExecution"
        ) or []
        for term in preferred:
            match = set_based_match_labels(term.get("preference") or {})
            for node, labels in candidates:
                if match({"metadata": {"labels": labels}}):
                    return node.name, ""
        if not selector:
            # The agent (no selector here) and plain pods land like the real scheduler would:
            # any node; prefer the node the snapshot describes for consistency.
            agent = agent_node(self.scenario)
            if any(node.name == agent.name for node, _ in candidates):
                return agent.name, ""
        return candidates[0][0].name, ""

    def _event(
        self, obj: Mapping[str, Any], kind: str, reason: str, message: str, component: str
    ) -> None:
        """A core/v1 Event about a pod, as the scheduler and kubelet record them."""
        meta = obj["metadata"]
        now = rfc3339(datetime.now(UTC))
        self.store.create(
            EVENTS,
            meta["namespace"],
            {
                "metadata": {"name": f"{meta['name']}.{uuid.uuid4().hex[:16]}"},
                "involvedObject": {
                    "kind": "Pod",
                    "apiVersion": "v1",
                    "namespace": meta["namespace"],
                    "name": meta["name"],
                    "uid": meta["uid"],
                },
                "reason": reason,
                "message": message,
                "type": kind,
                "source": {"component": component},
                "reportingComponent": component,
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
            },
        )

    # -- kubelet ---------------------------------------------------------------------------

    def _pod_live(self, namespace: str, name: str, uid: str) -> dict[str, Any] | None:
        pod = self.store.find(PODS, namespace, name)
        if pod is None or pod["metadata"]["uid"] != uid or pod["metadata"].get("deletionTimestamp"):
            return None
        return pod

    def _set_container_state(
        self,
        namespace: str,
        name: str,
        state: dict[str, Any],
        *,
        phase: str | None = None,
        ready: bool = False,
    ) -> None:
        def change(obj: dict[str, Any]) -> None:
            status = obj.setdefault("status", {})
            spec_images = {c["name"]: c["image"] for c in obj["spec"]["containers"]}
            runtime = self.scenario.container_runtime.split("://")[0]
            for container_status in status.get("containerStatuses") or []:
                container_status["state"] = state
                container_status["ready"] = ready
                container_status["started"] = "running" in state
                if "running" in state or "terminated" in state:
                    # Known once the image is pulled and the container created; stable after.
                    container_status["imageID"] = images.image_id(
                        self.scenario, spec_images[container_status["name"]]
                    )
                    container_status.setdefault(
                        "containerID", f"{runtime}://" + uuid.uuid4().hex * 2
                    )
            if phase:
                status["phase"] = phase
            status["conditions"] = [_condition("PodScheduled")] + (
                [_condition("Initialized"), _condition("ContainersReady"), _condition("Ready")]
                if ready
                else [
                    {
                        **_condition(
                            "Ready",
                            "PodCompleted"
                            if phase in ("Succeeded", "Failed")
                            else "ContainersNotReady",
                        ),
                        "status": "False",
                    }
                ]
            )

        self.store.mutate(PODS, namespace, name, change)

    def _start_container(self, namespace: str, pod_name: str, pod_uid: str) -> None:
        pod = self._pod_live(namespace, pod_name, pod_uid)
        if pod is None:
            return
        container = pod["spec"]["containers"][0]
        image = container["image"]
        if self._pull_refused(pod, image):
            return  # stays waiting: the Job deadline ends it
        if any(pattern in image for pattern in self.scenario.unpullable_images):
            reason = "ImagePullBackOff"
            self._set_container_state(
                namespace,
                pod_name,
                {"waiting": {"reason": reason, "message": f'Back-off pulling image "{image}"'}},
            )
            return  # stays waiting: the Job deadline ends it
        volumes = {
            volume["name"]: volume["configMap"]["name"]
            for volume in pod["spec"].get("volumes") or []
            if "configMap" in volume
        }
        missing = [
            cm for cm in volumes.values() if self.store.find(CONFIGMAPS, namespace, cm) is None
        ]
        if missing:
            # FailedMount: the container cannot be created until the ConfigMap exists.
            self._set_container_state(
                namespace,
                pod_name,
                {
                    "waiting": {
                        "reason": "ContainerCreating",
                        "message": f'configmap "{missing[0]}" not found',
                    }
                },
            )
            self.after(0.5, lambda: self._start_container(namespace, pod_name, pod_uid), floor=0.01)
            return
        started = datetime.now(UTC).replace(microsecond=0)
        run = self._play(pod, container, volumes, started)
        self._set_container_state(
            namespace,
            pod_name,
            {"running": {"startedAt": rfc3339(started)}},
            phase="Running",
            ready=True,
        )
        job_name = pod["metadata"]["labels"].get("batch.kubernetes.io/job-name", "")

        def mark_ready(obj: dict[str, Any]) -> None:
            obj.setdefault("status", {})["ready"] = 1

        if job_name:
            self.store.mutate(JOBS, namespace, job_name, mark_ready)
        key = (namespace, pod_name, container["name"])
        self.logs[key] = run.log
        if run.hang:
            return
        owner = next(iter(pod["metadata"].get("ownerReferences") or []), {})
        job = self.store.find(JOBS, namespace, owner.get("name", "")) if owner else None
        deadline = (job or {}).get("spec", {}).get("activeDeadlineSeconds")
        if job is not None and (not deadline or START_DELAY_SIM_S + run.sim_seconds < deadline):
            self._finishes_in_time.add(job["metadata"]["uid"])
        self.after(
            run.sim_seconds,
            lambda: self._finish_container(namespace, pod_name, pod_uid, run, started),
            floor=self.scenario.min_container_wall_s,
        )

    def _pull_refused(self, pod: Mapping[str, Any], image: str) -> bool:
        """The kubelet's pull from ``scenario.private_registry``: it needs the registry's Secret
        named in imagePullSecrets and present in the pod's namespace. Refused: events and the
        container states the kubelet reports (ErrImagePull, then ImagePullBackOff)."""
        registry = self.scenario.private_registry
        if not registry or not image.startswith(registry + "/"):
            return False
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        named = [str(ref.get("name", "")) for ref in pod["spec"].get("imagePullSecrets") or []]
        present = [n for n in named if self.store.find(SECRETS, namespace, n) is not None]
        if missing := [n for n in named if n not in present]:
            self._event(
                pod,
                "Warning",
                "FailedToRetrieveImagePullSecret",
                f"Unable to retrieve some image pull secrets ({', '.join(missing)}); attempting "
                "to pull the image may not succeed.",
                "kubelet",
            )
        if self.scenario.registry_secret in present:
            return False
        cause = (
            f'failed to pull and unpack image "{image}": failed to resolve reference '
            f'"{image}": pull access denied, repository does not exist or may require '
            "authorization: authorization failed: no basic auth credentials"
        )
        self._event(pod, "Normal", "Pulling", f'Pulling image "{image}"', "kubelet")
        self._event(pod, "Warning", "Failed", f'Failed to pull image "{image}": {cause}', "kubelet")
        self._event(pod, "Warning", "Failed", "Error: ErrImagePull", "kubelet")
        self._set_container_state(
            namespace, name, {"waiting": {"reason": "ErrImagePull", "message": cause}}
        )
        uid = pod["metadata"]["uid"]

        def back_off() -> None:
            live = self._pod_live(namespace, name, uid)
            if live is None:
                return
            self._event(live, "Normal", "BackOff", f'Back-off pulling image "{image}"', "kubelet")
            self._event(live, "Warning", "Failed", "Error: ImagePullBackOff", "kubelet")
            self._set_container_state(
                namespace,
                name,
                {
                    "waiting": {
                        "reason": "ImagePullBackOff",
                        "message": f'Back-off pulling image "{image}": ErrImagePull: {cause}',
                    }
                },
            )

        self.after(PULL_BACK_OFF_SIM_S, back_off, floor=0.005)
        return True

    def _play(
        self,
        pod: Mapping[str, Any],
        container: Mapping[str, Any],
        volumes: Mapping[str, str],
        started: datetime,
    ) -> containers.ContainerRun:
        namespace = pod["metadata"]["namespace"]
        args = [str(arg) for arg in container.get("args") or []]
        if container["name"] == "validator" and (
            match := _VALIDATOR_IMAGE.search(container["image"])
        ):
            validation_cm = volumes.get("validation")
            cm = self.store.find(CONFIGMAPS, namespace, validation_cm) if validation_cm else None
            return containers.run_validator(
                self.scenario,
                check=args[0] if args else None,
                phase=match.group(1),
                validation_yaml=(cm or {}).get("data", {}).get("validation.yaml"),
                started=started,
            )
        if container["name"] == "aicr" and "snapshot" in args:
            target = args[args.index("-o") + 1] if "-o" in args[:-1] else ""
            return containers.run_agent(self.scenario, started=started, snapshot_target=target)
        return containers.ContainerRun(0, 1.0)

    def _finish_container(
        self,
        namespace: str,
        pod_name: str,
        pod_uid: str,
        run: containers.ContainerRun,
        started: datetime,
    ) -> None:
        pod = self._pod_live(namespace, pod_name, pod_uid)
        if pod is None:
            return
        container = pod["spec"]["containers"][0]
        if run.exit_code == 0 and container["name"] == "aicr":
            args = [str(arg) for arg in container.get("args") or []]
            target = args[args.index("-o") + 1] if "-o" in args[:-1] else ""
            if target.startswith("cm://"):
                self._write_snapshot(target, container["image"])
        finished = started + timedelta(seconds=max(1, round(run.sim_seconds)))
        terminated: dict[str, Any] = {
            "exitCode": run.exit_code,
            "reason": run.reason or ("Completed" if run.exit_code == 0 else "Error"),
            "startedAt": rfc3339(started),
            "finishedAt": rfc3339(finished),
            "containerID": "containerd://" + uuid.uuid4().hex * 2,
        }
        if run.message:
            terminated["message"] = run.message[:4096]
        phase = "Succeeded" if run.exit_code == 0 else "Failed"
        self._set_container_state(namespace, pod_name, {"terminated": terminated}, phase=phase)
        job_name = pod["metadata"]["labels"].get("batch.kubernetes.io/job-name", "")
        if run.disruption:
            self._disrupt(namespace, pod_name, run.disruption)
        if job_name:
            self._pod_finished(namespace, job_name, succeeded=run.exit_code == 0, when=finished)

    def _disrupt(self, namespace: str, pod_name: str, disruption: str) -> None:
        """Eviction: the kubelet marks the pod Failed/Evicted (it stays listed). Node loss:
        the pod garbage collector marks it Failed and force-deletes it (no pod remains)."""
        evicted = disruption == "evicted"
        message = (
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: 52Mi."
            if evicted
            else "PodGC: node no longer exists"
        )

        def change(obj: dict[str, Any]) -> None:
            status = obj.setdefault("status", {})
            if evicted:
                status["reason"] = "Evicted"
                status["message"] = message
            status.setdefault("conditions", []).append(
                _condition(
                    "DisruptionTarget",
                    "TerminationByKubelet" if evicted else "DeletionByPodGC",
                    message,
                )
            )

        self.store.mutate(PODS, namespace, pod_name, change)
        if not evicted:
            self.store.remove(PODS, namespace, pod_name)

    def _write_snapshot(self, target: str, image: str) -> None:
        namespace, _, name = target.removeprefix("cm://").partition("/")
        # The agent reports the version it was built as; here read from the tag, so a
        # digest-pinned agent with no tag reports a dev build.
        tag = images.split_reference(image)[1] or "latest"
        version = tag if tag.startswith("v") else "v0.0.0-" + tag
        body = self.scenario.snapshot_text
        if body is None:
            body = snapshot_yaml(self.scenario, agent_version=version)
        cm = {
            "metadata": {
                "name": name,
                "labels": {
                    "app.kubernetes.io/name": "aicr",
                    "app.kubernetes.io/component": "Snapshot",
                    "app.kubernetes.io/version": version,
                },
                "managedFields": [
                    {
                        "manager": "aicr",
                        "operation": "Apply",
                        "apiVersion": "v1",
                        "fieldsType": "FieldsV1",
                    }
                ],
            },
            "data": {
                "snapshot.yaml": body,
                "format": "yaml",
                "timestamp": rfc3339(datetime.now(UTC)),
            },
        }
        existing = self.store.find(CONFIGMAPS, namespace, name)
        if existing is None:
            self.store.create(CONFIGMAPS, namespace, cm)
        else:
            self.store.replace(CONFIGMAPS, namespace, name, cm, check_version=False)

    def _pod_finished(
        self, namespace: str, job_name: str, *, succeeded: bool, when: datetime
    ) -> None:
        job = self.store.find(JOBS, namespace, job_name)
        if job is None or _terminal(job):
            return
        failed_so_far = int((job.get("status") or {}).get("failed", 0)) + (0 if succeeded else 1)
        retry = not succeeded and failed_so_far <= int(job["spec"].get("backoffLimit", 6))

        def change(obj: dict[str, Any]) -> None:
            status = obj.setdefault("status", {})
            status["active"] = 0
            status["ready"] = 0
            if succeeded:
                status["succeeded"] = 1
                status["completionTime"] = rfc3339(when)
                status["conditions"] = [
                    _condition(
                        "SuccessCriteriaMet",
                        "CompletionsReached",
                        "Reached expected number of succeeded pods",
                    ),
                    _condition(
                        "Complete",
                        "CompletionsReached",
                        "Reached expected number of succeeded pods",
                    ),
                ]
            else:
                status["failed"] = failed_so_far
                if not retry:
                    message = "Job has reached the specified backoff limit"
                    status["conditions"] = [
                        _condition("FailureTarget", "BackoffLimitExceeded", message),
                        _condition("Failed", "BackoffLimitExceeded", message),
                    ]

        self.store.mutate(JOBS, namespace, job_name, change)
        if retry:
            uid = job["metadata"]["uid"]
            self.after(1.0, lambda: self._create_pod(namespace, job_name, uid))

    def _deadline(self, namespace: str, name: str, uid: str) -> None:
        job = self._job_live(namespace, name, uid)
        if job is None or uid in self._finishes_in_time:
            return
        message = "Job was active longer than specified deadline"

        def change(obj: dict[str, Any]) -> None:
            status = obj.setdefault("status", {})
            status["active"] = 0
            status["ready"] = 0
            status["failed"] = int(status.get("failed", 0)) + 1
            status["conditions"] = [
                _condition("FailureTarget", "DeadlineExceeded", message),
                _condition("Failed", "DeadlineExceeded", message),
            ]

        self.store.mutate(JOBS, namespace, name, change)
        if self.scenario.keep_pod_on_deadline:
            return
        for pod in self._pods_of(namespace, name):
            self.delete_pod(namespace, pod["metadata"]["name"])

    # -- deletion and garbage collection ---------------------------------------------------

    def _pods_of(self, namespace: str, job_name: str) -> list[dict[str, Any]]:
        return [
            pod
            for pod in self.store.list(PODS, namespace)
            if (pod["metadata"].get("labels") or {}).get("batch.kubernetes.io/job-name") == job_name
            and any(
                ref.get("kind") == "Job" for ref in pod["metadata"].get("ownerReferences") or []
            )
        ]

    def delete_pod(self, namespace: str, name: str, *, grace_sim_s: float = GRACE_SIM_S) -> None:
        """Graceful deletion: deletionTimestamp now, gone after the grace period."""

        def mark(obj: dict[str, Any]) -> None:
            if not obj["metadata"].get("deletionTimestamp"):
                obj["metadata"]["deletionTimestamp"] = rfc3339(datetime.now(UTC))
                obj["metadata"]["deletionGracePeriodSeconds"] = 30

        self.store.mutate(PODS, namespace, name, mark)

    def delete_job(self, namespace: str, name: str, policy: str) -> dict[str, Any] | None:
        """Returns the Job still present (Foreground, or held by another finalizer, as any
        object with finalizers is: it stays, marked, until they are removed) or None when it
        was removed now."""
        job = self.store.find(JOBS, namespace, name)
        held = bool(job is not None and _foreign_finalizers(job))
        if policy == "Foreground" or held:

            def mark(obj: dict[str, Any]) -> None:
                meta = obj["metadata"]
                if not meta.get("deletionTimestamp"):
                    meta["deletionTimestamp"] = rfc3339(datetime.now(UTC))
                    meta["deletionGracePeriodSeconds"] = 0
                    if policy == "Foreground":  # added to the Job's own finalizers
                        meta["finalizers"] = [*(meta.get("finalizers") or []), "foregroundDeletion"]

            return self.store.mutate(JOBS, namespace, name, mark)
        self.store.remove(JOBS, namespace, name)
        for pod in self._pods_of(namespace, name):
            if policy == "Background":
                self.delete_pod(namespace, pod["metadata"]["name"])
            else:  # Orphan (the batch/v1 default): the pods stay, without their owner

                def orphan(obj: dict[str, Any]) -> None:
                    obj["metadata"].pop("ownerReferences", None)

                self.store.mutate(PODS, namespace, pod["metadata"]["name"], orphan)
        return None

    def _finalize(self, plural: str, namespace: str, name: str) -> None:
        if plural == "pods":
            pod = self.store.find(PODS, namespace, name)
            if pod is None:
                return
            terminal = pod["status"].get("phase") in ("Succeeded", "Failed")
            delay = 0.0 if terminal else GRACE_SIM_S

            def remove() -> None:
                if self.store.find(PODS, namespace, name) is not None:
                    self.store.remove(PODS, namespace, name)
                    job_name = (pod["metadata"].get("labels") or {}).get(
                        "batch.kubernetes.io/job-name"
                    )
                    if job_name:
                        self.after(0, lambda: self._finalize("jobs", namespace, job_name))

            self.after(delay, remove, floor=0.005)
            return
        job = self.store.find(JOBS, namespace, name)
        if job is None or not job["metadata"].get("deletionTimestamp"):
            return
        pods = self._pods_of(namespace, name)
        for pod in pods:
            if not pod["metadata"].get("deletionTimestamp"):
                self.delete_pod(namespace, pod["metadata"]["name"])
        if not pods and not _foreign_finalizers(job):
            self.store.remove(JOBS, namespace, name)


def _foreign_finalizers(job: Mapping[str, Any]) -> list[str]:
    """Finalizers other than the garbage collector's: a controller (not simulated) holds the
    Job until it removes them."""
    return [f for f in job["metadata"].get("finalizers") or [] if f != "foregroundDeletion"]


def tolerates(tolerations: Any, taint: Mapping[str, Any]) -> bool:
    """Kubernetes' ToleratesTaint: effect "" matches every effect, key "" with Exists every
    key; Exists ignores the value, Equal (the default) compares it."""
    for toleration in tolerations:
        if not isinstance(toleration, Mapping):
            continue
        effect = toleration.get("effect") or ""
        if effect and effect != taint.get("effect"):
            continue
        key = toleration.get("key") or ""
        operator = toleration.get("operator") or "Equal"
        if key and key != taint.get("key"):
            continue
        if not key and operator != "Exists":
            continue
        if operator == "Exists" or (toleration.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _terminal(job: Mapping[str, Any]) -> bool:
    return any(
        condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True"
        for condition in (job.get("status") or {}).get("conditions") or []
    )
