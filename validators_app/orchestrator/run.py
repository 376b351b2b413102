"""``run_validation``: AICR's ``aicr validate`` sequence against one cluster (§1-§7).

snapshot agent → readiness → declared-check pre-flight → namespace, per-run RBAC, data
ConfigMaps → one Job per selected check (sequential, catalog order) → wait → extraction → CTRF
per phase → cleanup. Errors that AICR turns into exit 2/5/8 (readiness, pre-flight, the
snapshot agent, prepare, RBAC revocation) end the run as ``error`` with no CTRF.

A check's own API trouble costs only that check, as in AICR's ``runPhase``
(pkg/validator/validator.go): a wait that fails (the API keeps failing on the Job's GET or
watch, or the Job vanished) goes to HandleTimeout (pkg/validator/job/result.go) and the check
is ``other`` with ``validation failed: <cause>``; a pod lookup that fails after the Job is
terminal is ``other`` with ``pod not found for Job <job>: <cause>``; the Job is deleted best
effort and the next check runs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import urllib3
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from aicr_site.lib import outbound
from recipes_app.resolver.yamlload import overlong_number
from recipes_app.resolver.yamlv3 import marshal_deterministic

from . import agent, extract, plan
from .conversion import CatalogData, validation_document
from .ctrf import build_phase_report, merge_reports, phase_status, to_bytes
from .images import default_agent_image, is_mutable
from .kube import (
    AlreadyExists,
    ApiUnavailable,
    Kube,
    KubeError,
    RetryPolicy,
    describe,
    relist_backoff_s,
)
from .logs import process_logs
from .model import PHASE_ORDER, CheckOutcome, InvalidRecipeInput, RunHooks, RunOutcome, RunSpec
from .readiness import check_readiness

__all__ = ["run_validation"]

log = logging.getLogger(__name__)

WAIT_BUFFER_S = 30  # defaults.ValidatorWaitBuffer
POLL_S = 2.0  # longest gap between heartbeats / cancel polls while waiting
POD_GONE_S = 60  # wait for a deleted Job's pod
AGENT_GONE_S = 30  # wait for an old agent Job's deletion
MAX_SNAPSHOT_BYTES = 4 * 1024 * 1024


def pause(seconds: float) -> None:
    """Sleep while polling for a deletion to finish (one name, so bench/ can count it)."""
    time.sleep(seconds)


def _poll_interval(elapsed_s: float, previous: float) -> float:
    """10 ms steps for the first 0.2 s (a quick pod is gone by then), then doubling up to 1 s,
    so a real 30 s termination grace period costs ~50 LISTs rather than 3,000."""
    return 0.01 if elapsed_s < 0.2 else min(previous * 2, 1.0)


class RunError(Exception):
    """Ends the run as ``error`` with this message (AICR: exit 2/5/8, no CTRF)."""


class Cancelled(Exception):
    """hooks.cancel_requested() said so."""


class _HookRaised(Exception):
    """A hook raised (its exception is the ``__cause__``): the caller's own reason to stop, e.g.
    its claim on the run moved to another worker. Nothing is cleaned up on the cluster."""


class _WaitExpired(Exception):
    """The wait budget ran out before the Job was terminal."""


class _WaitFailed(Exception):
    """The wait itself failed (the API kept failing, the Job vanished): AICR's wait error."""


def _now_ms() -> int:
    return int(time.time() * 1000)


class _NullSafeSnapshot(yaml.SafeLoader):
    """SafeLoader that refuses anchors/aliases: a snapshot has none, a YAML bomb needs them."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise yaml.YAMLError("aliases are not allowed in a snapshot")
        event = self.peek_event()
        if getattr(event, "anchor", None):
            raise yaml.YAMLError("anchors are not allowed in a snapshot")
        if isinstance(event, yaml.ScalarEvent):
            problem = overlong_number(event)
            if problem is not None:
                raise yaml.YAMLError(problem)
        return super().compose_node(parent, index)


def parse_snapshot(text: str) -> dict[str, Any]:
    """The agent's snapshot YAML, bounded and alias-free; RunError when unusable."""
    if len(text.encode("utf-8", "replace")) > MAX_SNAPSHOT_BYTES:
        raise RunError(f"snapshot is larger than {MAX_SNAPSHOT_BYTES} bytes")
    try:
        doc = yaml.load(text, Loader=_NullSafeSnapshot)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise RunError(f"snapshot is not valid YAML: {exc}") from exc
    except RecursionError:
        raise RunError("snapshot is not valid YAML: nested too deeply") from None
    except (ValueError, OverflowError) as exc:  # a date like 2026-13-45
        raise RunError(f"snapshot is not valid YAML: {str(exc)[:200]}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("measurements"), list):
        raise RunError("snapshot has no measurements list")
    return doc


class _Run:
    def __init__(
        self, api: client.ApiClient, spec: RunSpec, hooks: RunHooks, retry: RetryPolicy | None
    ) -> None:
        # The retrying client heartbeats and polls for a cancel between attempts and sleeps.
        self.kube = Kube(api, retry, between_attempts=self._between_attempts)
        self.stopping = False  # cleaning up: a cancel seen now must not cut the cleanup short
        self.spec = spec
        self.hooks = hooks
        self.ns = spec.namespace
        self.images = plan.ImageSettings(
            version=spec.aicr_version,
            commit=spec.aicr_commit,
            registry=spec.image_registry,
            tag=spec.image_tag,
        )
        self.scheduling = plan.Scheduling(
            image_pull_secrets=spec.image_pull_secrets,
            node_selector=spec.node_selector,
            tolerations=spec.tolerations,
            check_inputs=spec.check_inputs,
        )
        self.resuming = spec.snapshot_yaml is not None or bool(spec.completed)
        self.checks: list[CheckOutcome] = []
        self.agent = extract.RanImage("", "")  # stays empty when an earlier attempt took it
        self.prepared = False

    # --- paths ------------------------------------------------------------------------------

    def _ns_path(self, kind: str, name: str = "") -> str:
        base = {
            "configmaps": f"/api/v1/namespaces/{self.ns}/configmaps",
            "serviceaccounts": f"/api/v1/namespaces/{self.ns}/serviceaccounts",
            "pods": f"/api/v1/namespaces/{self.ns}/pods",
            "jobs": f"/apis/batch/v1/namespaces/{self.ns}/jobs",
            "roles": f"/apis/rbac.authorization.k8s.io/v1/namespaces/{self.ns}/roles",
            "rolebindings": f"/apis/rbac.authorization.k8s.io/v1/namespaces/{self.ns}/rolebindings",
        }[kind]
        return f"{base}/{name}" if name else base

    @staticmethod
    def _cluster_path(kind: str, name: str = "") -> str:
        base = {
            "namespaces": "/api/v1/namespaces",
            "nodes": "/api/v1/nodes",
            "clusterroles": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            "clusterrolebindings": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        }[kind]
        return f"{base}/{name}" if name else base

    # --- the sequence -----------------------------------------------------------------------

    def execute(self) -> RunOutcome:
        spec = self.spec
        snapshot_yaml = spec.snapshot_yaml
        try:
            if not plan.valid_run_id(spec.run_id):
                raise RunError(f"invalid run ID {spec.run_id!r}: want YYYYMMDD-HHMMSS-<16 hex>")
            phases = self._phases()
            if snapshot_yaml is None:
                self._refuse_mutable({"snapshot agent": self._agent_image()})
                taken, self.agent = self._take_snapshot()
                # A cluster wrote it: refused (bomb, NUL, size) before any hook stores it.
                snapshot = parse_snapshot(taken)
                snapshot_yaml = taken
                self._hook("snapshot_taken", snapshot_yaml, self.agent.image, self.agent.digest)
            else:
                snapshot = parse_snapshot(snapshot_yaml)
            # ToValidationInputWithContext + resolveBenchmarkRuntimeRef come before readiness in
            # AICR: a contradictory allocation configuration ends the run before any Job of it.
            try:
                validation = validation_document(spec.recipe, CatalogData(spec.catalog_files))
            except InvalidRecipeInput as exc:
                return RunOutcome("error", str(exc), snapshot_yaml)
            failure = check_readiness(spec.recipe, snapshot)
            if failure is not None:
                return RunOutcome("error", failure.message, snapshot_yaml)
            entries = plan.catalog_entries(spec.validator_catalog)
            try:
                selected = {p: plan.select_checks(spec.recipe, entries, p) for p in phases}
            except plan.PreflightError as exc:
                return RunOutcome("error", str(exc), snapshot_yaml)
            self._refuse_mutable(
                {e.name: self.images.resolve(e.image) for p in phases for e in selected[p]}
            )
            self._prepare(snapshot, validation)
            reports = self._phase_loop(phases, selected)
            self._cleanup(strict=True)
        except _HookRaised:
            raise  # leave everything for whoever owns the run now
        except Cancelled:
            self._cleanup(strict=False)
            return RunOutcome("cancelled", "", snapshot_yaml, checks=tuple(self.checks))
        except (RunError, KubeError, plan.PreflightError) as exc:
            self._cleanup(strict=False)
            return RunOutcome("error", str(exc), snapshot_yaml, checks=tuple(self.checks))
        except Exception:
            # Not ours to describe (e.g. the task's time limit): still revoke the run's
            # cluster-admin binding before the exception goes up.
            self._cleanup(strict=False)
            raise
        phase_bytes = {p: to_bytes(r) for p, r in reports.items()}
        merged = to_bytes(merge_reports(spec.aicr_version, list(reports.values())))
        failed = any(phase_status(r) in ("failed", "other") for r in reports.values())
        return RunOutcome(
            "failed" if failed else "passed",
            "",
            snapshot_yaml,
            phase_bytes,
            merged,
            tuple(self.checks),
            agent_image=self.agent.image,
            agent_image_digest=self.agent.digest,
        )

    def _phases(self) -> tuple[str, ...]:
        phases: list[str] = []
        for p in self.spec.phases or PHASE_ORDER:
            if p not in PHASE_ORDER:
                raise RunError(f"unknown phase {p!r}: want one of {', '.join(PHASE_ORDER)}")
            if p not in phases:
                phases.append(p)  # ParsePhaseSelection keeps the user's order, deduplicated
        return tuple(phases)

    def _hook(self, name: str, *args: Any) -> Any:
        try:
            return getattr(self.hooks, name)(*args)
        except Exception as exc:
            raise _HookRaised(name) from exc

    def _agent_image(self) -> str:
        return self.spec.agent_image or default_agent_image(self.spec.aicr_version)

    def _refuse_mutable(self, images: Mapping[str, str]) -> None:
        """RunError naming every mutable image when the spec refuses them (nothing deployed)."""
        if not self.spec.refuse_mutable_images:
            return
        mutable = [f"{who}: {image}" for who, image in images.items() if is_mutable(image)]
        if mutable:
            raise RunError(
                "mutable images refused (VALIDATION_REFUSE_MUTABLE_IMAGES): "
                + "; ".join(mutable)
                + " — pin them by digest (AICR_VALIDATOR_IMAGE / the catalog) or run an AICR "
                "release, whose images carry frozen tags"
            )

    def _check_cancel(self) -> None:
        self._hook("heartbeat")
        if self._hook("cancel_requested"):
            raise Cancelled

    def _between_attempts(self) -> None:
        if not self.stopping:
            self._check_cancel()

    @contextmanager
    def _uninterrupted(self) -> Iterator[None]:
        """Deletions that must run to the end whatever a cancel says (a hook is not called)."""
        outer, self.stopping = self.stopping, True
        try:
            yield
        finally:
            self.stopping = outer

    # --- §2 snapshot agent --------------------------------------------------------------------

    def _create_or_update(self, what: str, collection: str, body: Mapping[str, Any]) -> None:
        try:
            self.kube.create(what, collection, body)
        except AlreadyExists:
            self.kube.replace(what, f"{collection}/{body['metadata']['name']}", body)

    def _take_snapshot(self) -> tuple[str, extract.RanImage]:
        """The agent's snapshot YAML and the image its ``aicr`` container ran."""
        kube, ns = self.kube, self.ns
        try:
            kube.create("create namespace", self._cluster_path("namespaces"), {
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": ns, "labels": {"app.kubernetes.io/managed-by": "aicr"}},
            })  # fmt: skip
        except AlreadyExists:
            kube.merge_patch(
                "label namespace", self._cluster_path("namespaces", ns),
                {"metadata": {"labels": {"app.kubernetes.io/managed-by": "aicr"}}},
            )  # fmt: skip
        try:
            # Inside the ``try``: a failure or a cancel part-way removes what was created.
            self._create_or_update(
                "agent service account", self._ns_path("serviceaccounts"), agent.service_account(ns)
            )
            self._create_or_update("agent role", self._ns_path("roles"), agent.role(ns))
            self._create_or_update(
                "agent role binding", self._ns_path("rolebindings"), agent.role_binding(ns)
            )
            self._create_or_update(
                "agent cluster role", self._cluster_path("clusterroles"), agent.cluster_role()
            )
            self._create_or_update(
                "agent cluster role binding",
                self._cluster_path("clusterrolebindings"),
                agent.cluster_role_binding(ns),
            )
            # A fixed name: an earlier agent Job is deleted first and its deletion awaited (≤30 s).
            if kube.delete(
                "delete old agent job", self._ns_path("jobs", agent.AGENT_JOB), foreground=True
            ):
                self._await_gone(self._ns_path("jobs", agent.AGENT_JOB), AGENT_GONE_S)
            selector = dict(self.spec.node_selector)  # --node-selector replaces the GPU default
            if not selector:
                gpu_nodes = kube.list(
                    "list GPU nodes",
                    self._cluster_path("nodes"),
                    label="nvidia.com/gpu.present=true",
                    limit="1",
                )
                selector = {"nvidia.com/gpu.present": "true"} if gpu_nodes.get("items") else {}
            image = self._agent_image()
            body = agent.job(
                ns,
                image,
                selector,
                tolerations=self.spec.agent_tolerations,
                image_pull_secrets=self.spec.image_pull_secrets,
            )
            kube.create("create agent job", self._ns_path("jobs"), body)
            try:
                job = self._wait_job(agent.AGENT_JOB, self.spec.snapshot_timeout_s)
            except _WaitExpired:
                raise RunError(
                    f"snapshot agent Job {agent.AGENT_JOB} did not complete within "
                    f"{plan.go_duration(self.spec.snapshot_timeout_s)}"
                ) from None
            except _WaitFailed as exc:  # AICR: the snapshot failing fails the run
                raise RunError(str(exc)) from exc
            failed = extract.failed_condition(job)
            if failed is not None:
                reason, detail = failed.get("reason", ""), failed.get("message", "")
                raise RunError(
                    f"snapshot agent Job {agent.AGENT_JOB} failed ({reason}): {detail}"
                    + self._agent_log_tail()
                )
            ran = self._agent_ran(image)
            cm = kube.get("read snapshot", self._ns_path("configmaps", agent.SNAPSHOT_CONFIGMAP))
            text = ((cm or {}).get("data") or {}).get("snapshot.yaml")
            if not isinstance(text, str) or not text.strip():
                raise RunError(
                    f"ConfigMap {agent.SNAPSHOT_CONFIGMAP} has no snapshot.yaml "
                    "after the agent completed"
                )
        except _HookRaised:
            raise
        except Exception:
            self._agent_cleanup()
            raise
        self._agent_cleanup()
        return text, ran

    def _agent_ran(self, image: str) -> extract.RanImage:
        """The agent pod's image and digest, read before the cleanup deletes the pod (its
        status is the only record of what the runtime pulled for a tag). Best effort: AICR
        reads no agent pod on success, so a failed read leaves the digest "not reported" and
        the run goes on."""
        try:
            ran = extract.ran_image(self._agent_pod(), "aicr")
        except KubeError as exc:
            log.warning("reading the agent pod's image digest failed: %s", exc)
            ran = extract.RanImage("", "")
        return ran if ran.image else extract.RanImage(image, "")

    def _agent_pod(self) -> dict[str, Any] | None:
        pods = self.kube.list(
            "list agent pods",
            self._ns_path("pods"),
            label=f"batch.kubernetes.io/job-name={agent.AGENT_JOB}",
        )
        return extract.pick_pod(pods.get("items") or [])

    def _agent_log_tail(self) -> str:
        try:
            pod = self._agent_pod()
            if pod is None:
                return ""
            lines, _ = process_logs(
                self.kube.log("agent log", self.ns, pod["metadata"]["name"], "aicr")
            )
            return "\nagent log (last lines):\n" + "\n".join(lines[-20:]) if lines else ""
        except KubeError:
            return ""

    def _agent_cleanup(self) -> None:
        with self._uninterrupted():
            self._delete_agent_objects()

    def _delete_agent_objects(self) -> None:
        for what, path, fg in (
            ("delete agent job", self._ns_path("jobs", agent.AGENT_JOB), True),
            (
                "delete agent service account",
                self._ns_path("serviceaccounts", agent.AGENT_SA),
                False,
            ),
            ("delete agent role", self._ns_path("roles", agent.AGENT_SA), False),
            ("delete agent role binding", self._ns_path("rolebindings", agent.AGENT_SA), False),
            (
                "delete agent cluster role",
                self._cluster_path("clusterroles", agent.AGENT_CLUSTER_ROLE),
                False,
            ),
            (
                "delete agent cluster role binding",
                self._cluster_path("clusterrolebindings", agent.AGENT_CLUSTER_ROLE),
                False,
            ),
        ):
            try:
                self.kube.delete(what, path, foreground=fg)
            except (KubeError, OSError) as exc:
                log.warning("%s: %s", what, exc)

    # --- §4 per-run objects ---------------------------------------------------------------

    def _prepare(self, snapshot: Mapping[str, Any], validation: Mapping[str, Any]) -> None:
        kube, ns, run_id = self.kube, self.ns, self.spec.run_id
        kube.apply("apply namespace", self._cluster_path("namespaces", ns), plan.namespace_body(ns))
        sa = plan.service_account_body(run_id, ns)
        crb = plan.cluster_role_binding_body(run_id, ns)
        kube.apply(
            "apply validator service account",
            self._ns_path("serviceaccounts", sa["metadata"]["name"]),
            sa,
        )
        self.prepared = True  # from here on the RBAC must be revoked whatever happens
        kube.apply(
            "apply validator cluster role binding",
            self._cluster_path("clusterrolebindings", crb["metadata"]["name"]),
            crb,
        )
        try:
            snapshot_text = marshal_deterministic(snapshot)
            validation_text = marshal_deterministic(validation)
        except ValueError as exc:
            raise RunError(f"cannot serialize the run's data ConfigMaps: {exc}") from exc
        for name, key, text in (
            (f"aicr-snapshot-{run_id}", "snapshot.yaml", snapshot_text),
            (f"aicr-validation-{run_id}", "validation.yaml", validation_text),
        ):
            body = plan.data_config_map(name, key, text, run_id=run_id, namespace=ns)
            try:
                kube.create(f"create ConfigMap {name}", self._ns_path("configmaps"), body)
            except AlreadyExists:
                current = (
                    kube.get(f"read ConfigMap {name}", self._ns_path("configmaps", name)) or {}
                )
                current.setdefault("metadata", {})["labels"] = body["metadata"]["labels"]
                current["data"] = body["data"]
                kube.replace(f"update ConfigMap {name}", self._ns_path("configmaps", name), current)

    # --- §6 phases and checks -------------------------------------------------------------

    def _phase_loop(
        self, phases: tuple[str, ...], selected: Mapping[str, list[plan.CatalogEntry]]
    ) -> dict[str, dict[str, Any]]:
        done = {(c.phase, c.name): c for c in self.spec.completed}
        reports: dict[str, dict[str, Any]] = {}
        for phase in phases:
            self._hook("phase_started", phase)
            start = _now_ms()
            outcomes: list[CheckOutcome] = []
            for entry in selected[phase]:
                outcome = done.get((phase, entry.name))
                if outcome is None:
                    self._check_cancel()
                    outcome = self._run_check(entry)  # reports check_finished itself
                outcomes.append(outcome)
                self.checks.append(outcome)
            report = build_phase_report(
                version=self.spec.aicr_version, outcomes=outcomes, start_ms=start, stop_ms=_now_ms()
            )
            reports[phase] = report
            self._store_report(phase, report)
        return reports

    def _store_report(self, phase: str, report: Mapping[str, Any]) -> None:
        """Best effort, as AICR: SSA ConfigMap aicr-ctrf-<runID>-<phase>, manager aicr-validator."""
        body = plan.ctrf_config_map(
            to_bytes(report).decode("utf-8").rstrip("\n"),
            run_id=self.spec.run_id,
            phase=phase,
            namespace=self.ns,
        )
        try:
            self.kube.apply(
                f"store {phase} CTRF",
                self._ns_path("configmaps", body["metadata"]["name"]),
                body,
                manager="aicr-validator",
            )
        except KubeError as exc:
            log.warning("storing the %s CTRF ConfigMap failed: %s", phase, exc)

    def _run_check(self, entry: plan.CatalogEntry) -> CheckOutcome:
        name = plan.job_name(self.spec.run_id, entry.name)
        self._hook("check_started", entry.phase, entry.name, name)
        path = self._ns_path("jobs", name)
        existing = self.kube.get("read job", path) if self.resuming else None
        if existing is None:
            body = plan.render_job(
                entry,
                run_id=self.spec.run_id,
                namespace=self.ns,
                recipe=self.spec.recipe,
                images=self.images,
                scheduling=self.scheduling,
            )
            try:
                self.kube.apply(f"apply job {name}", path, body)
            except KubeError as exc:
                verdict = extract.Verdict(-1, f"failed to deploy Job: {exc}")
                outcome = extract.outcome(entry.phase, entry.name, name, verdict, b"")
                self._hook("check_finished", outcome)
                return outcome
            except Cancelled:
                self._delete_job(name)  # the apply may have gone through before the cancel
                raise
        try:
            try:
                job = self._wait_job(name, entry.deadline_s + WAIT_BUFFER_S)
            except _WaitExpired:
                timeout = plan.go_duration(entry.deadline_s)
                outcome = self._handle_timeout(
                    entry, name, f"timeout: validator did not complete within {timeout}"
                )
            except _WaitFailed as exc:
                # AICR's waitFailureMessage: the cause, not the catalog timeout (its #1966).
                outcome = self._handle_timeout(entry, name, f"validation failed: {exc}")
            else:
                outcome = self._extract(entry, name, job)
        except _HookRaised:
            raise
        except Exception:
            self._delete_job(name)  # the Job in flight goes with the run
            raise
        # The result is recorded before its Job is deleted: a worker killed in between leaves a
        # recorded check (the Job's deletion is then only tidying up), never a lost result that
        # a resuming worker would have to run again.
        self._hook("check_finished", outcome)
        # Not in a ``finally``: when a hook raises (the run's claim moved to another worker),
        # nothing is deleted, so the new worker adopts this Job by its deterministic name.
        self._delete_job(name)
        return outcome

    def _wait_job(self, name: str, budget_s: float) -> dict[str, Any]:
        """WaitForJobTerminal: GET, then WATCH by field selector from its resourceVersion.

        The watch is opened in windows of ≤ POLL_S so the run heartbeats and sees a cancel;
        a window that simply ends re-watches from the last resourceVersion, a closed or
        expired (410) watch re-lists after AICR's 2 s ±20 % backoff. ``_WaitFailed`` when the
        API keeps failing or the Job is gone, ``_WaitExpired`` when the budget runs out.
        """
        try:
            return self._watch_until_terminal(name, budget_s)
        except (KubeError, RunError) as exc:
            raise _WaitFailed(str(exc)) from exc

    def _watch_until_terminal(self, name: str, budget_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + budget_s
        path = self._ns_path("jobs", name)
        job = self.kube.get(f"read job {name}", path)
        if job is None:
            raise RunError(f"Job {name} not found after it was applied")
        rv = job["metadata"].get("resourceVersion", "")
        failures = 0
        while not extract.is_terminal(job):
            self._check_cancel()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _WaitExpired
            events = self.kube.watch_jobs(self.ns, name, rv, int(min(POLL_S, max(1, remaining))))
            try:
                while True:
                    try:
                        event = next(events, None)
                    except (
                        ApiException,
                        urllib3.exceptions.HTTPError,
                        OSError,
                        ValueError,
                        outbound.OutboundError,  # a watch answer past its cap or deadline
                    ) as exc:
                        # Closed or expired (410) watch, or a transport error: back off and re-list.
                        failures += 1
                        if failures >= self.kube.retry.attempts:
                            raise ApiUnavailable(
                                f"watch job {name}: Kubernetes API still failing after "
                                f"{failures} attempt(s): {describe(exc)}"
                            ) from exc
                        backoff = relist_backoff_s()
                        if time.monotonic() + backoff > deadline:
                            raise _WaitExpired from exc
                        self.kube.pause(backoff)  # heartbeats and sees a cancel meanwhile
                        job, rv = self._relist_job(name)
                        break
                    if event is None:
                        failures = 0  # the window ended normally: watch again from ``rv``
                        break
                    obj = event.get("raw_object") or {}
                    if event.get("type") == "DELETED":
                        raise RunError(f"Job {name} was deleted while waiting for it")
                    if isinstance(obj, dict) and (obj.get("metadata") or {}).get("name") == name:
                        job = obj
                        rv = obj["metadata"].get("resourceVersion", rv)
                        if extract.is_terminal(job):
                            return job
                    self._check_cancel()  # outside the try: a hook's exception is never retried
            finally:
                events.close()  # release the watch connection however the window ended
        return job

    def _relist_job(self, name: str) -> tuple[dict[str, Any], str]:
        listed = self.kube.list(
            f"list job {name}", self._ns_path("jobs"), field=f"metadata.name={name}"
        )
        items = listed.get("items") or []
        if not items:
            raise RunError(f"Job {name} disappeared while waiting for it")
        rv = (listed.get("metadata") or {}).get("resourceVersion")
        return items[0], rv or items[0]["metadata"].get("resourceVersion", "")

    def _pods_of(self, job_name: str) -> list[dict[str, Any]]:
        pods = self.kube.list(
            f"list pods of {job_name}",
            self._ns_path("pods"),
            label=f"batch.kubernetes.io/job-name={job_name}",
        )
        return pods.get("items") or []

    def _find_pod(self, job_name: str) -> dict[str, Any] | None:
        return extract.pick_pod(self._pods_of(job_name))

    def _read_log(self, pod: Mapping[str, Any]) -> bytes:
        try:
            return self.kube.log(
                "read validator log", self.ns, pod["metadata"]["name"], "validator"
            )
        except KubeError as exc:
            log.warning("log read failed: %s", exc)  # only a warning in AICR
            return b""

    def _extract(self, entry: plan.CatalogEntry, name: str, job: Mapping[str, Any]) -> CheckOutcome:
        """ExtractResult (§6.3): the pod, its ``validator`` container, its log. A pod LIST that
        keeps failing establishes nothing about the pod: AICR's missingPodOutcome then reports
        ``pod not found`` with the cause (exit -1, ``other``), never the Job's condition."""
        try:
            pod = self._find_pod(name)
        except KubeError as exc:
            verdict = extract.Verdict(-1, f"pod not found for Job {name}: {exc}")
            return extract.outcome(entry.phase, entry.name, name, verdict, b"")
        verdict = extract.from_pod(pod, job, job_name=name, deadline_s=entry.deadline_s)
        logs = self._read_log(pod) if pod is not None and verdict.read_logs else b""
        ran = extract.ran_image(pod, "validator")
        return extract.outcome(entry.phase, entry.name, name, verdict, logs, ran)

    def _handle_timeout(self, entry: plan.CatalogEntry, name: str, fallback: str) -> CheckOutcome:
        """HandleTimeout (§6.4): read what exists; the real exit code if it did terminate. A
        pod lookup that fails is AICR's ``pod never reached running state``."""
        try:
            pod = self._find_pod(name)
        except KubeError as exc:
            log.warning("pod lookup for Job %s after its wait failed: %s", name, exc)
            pod = None
        verdict = extract.after_timeout(pod, fallback)
        logs = self._read_log(pod) if pod is not None else b""
        ran = extract.ran_image(pod, "validator")
        return extract.outcome(entry.phase, entry.name, name, verdict, logs, ran)

    def _delete_job(self, name: str) -> None:
        """Delete the Job (Foreground) and wait ≤60 s for its pod to go (a warning otherwise)."""
        with self._uninterrupted():
            self._delete_job_and_wait(name)

    def _delete_job_and_wait(self, name: str) -> None:
        try:
            if self.kube.delete(f"delete job {name}", self._ns_path("jobs", name), foreground=True):
                started = time.monotonic()
                deadline = started + POD_GONE_S
                delay = 0.01
                while self._pods_of(name):  # terminating pods count: wait until gone
                    if time.monotonic() > deadline:
                        log.warning(
                            "pod of Job %s still present %ss after deletion", name, POD_GONE_S
                        )
                        break
                    pause(delay)
                    delay = _poll_interval(time.monotonic() - started, delay)
        except (KubeError, OSError) as exc:
            log.warning("delete job %s: %s", name, exc)

    def _await_gone(self, path: str, timeout_s: float) -> None:
        started = time.monotonic()
        deadline = started + timeout_s
        delay = 0.01
        while self.kube.get("await deletion", path) is not None and time.monotonic() < deadline:
            self._between_attempts()  # up to 30 s: heartbeat, and let a cancel in
            pause(delay)
            delay = _poll_interval(time.monotonic() - started, delay)

    # --- §7 cleanup -------------------------------------------------------------------------

    def _cleanup(self, *, strict: bool) -> None:
        """CRB then SA (a failure is a run error when ``strict``), then the ConfigMaps (warned)."""
        if not self.prepared:
            return
        with self._uninterrupted():
            self._revoke_and_delete(strict=strict)

    def _revoke_and_delete(self, *, strict: bool) -> None:
        self.prepared = False
        run_id = self.spec.run_id
        rbac = (
            (
                "revoke cluster role binding",
                self._cluster_path("clusterrolebindings", f"aicr-validator-{run_id}"),
            ),
            (
                "delete service account",
                self._ns_path("serviceaccounts", f"aicr-validator-{run_id}"),
            ),
        )
        for what, path in rbac:
            try:
                self.kube.delete(what, path)
            except KubeError as exc:
                if strict:
                    raise RunError(f"failed to revoke validator RBAC: {exc}") from exc
                log.warning("%s: %s", what, exc)
        names = [f"aicr-snapshot-{run_id}", f"aicr-validation-{run_id}"] + [
            f"aicr-ctrf-{run_id}-{p}" for p in PHASE_ORDER
        ]
        for cm in names:
            try:
                self.kube.delete(f"delete ConfigMap {cm}", self._ns_path("configmaps", cm))
            except KubeError as exc:
                log.warning("delete ConfigMap %s: %s", cm, exc)


def run_validation(
    api: client.ApiClient, spec: RunSpec, hooks: RunHooks, *, retry: RetryPolicy | None = None
) -> RunOutcome:
    """Run ``spec`` on the cluster behind ``api``; never raises for cluster-side failures.

    An exception raised by a hook propagates unchanged and nothing is deleted on the cluster.
    """
    try:
        return _Run(api, spec, hooks, retry).execute()
    except _HookRaised as exc:
        cause = exc.__cause__
        if cause is None:  # pragma: no cover - _hook always chains
            raise
        raise cause from None
