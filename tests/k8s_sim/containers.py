"""What AICR's containers do on the simulated cluster (AICR-VALIDATE.md §2, §8, §9).

The simulated kubelet calls ``run_container`` when a pod's container "starts"; the result says
how long it runs (simulated seconds), how it ends (exit code, termination message, reason) and
what it logged (slog text lines on stderr interleaved with stdout, as ``kubectl logs`` shows).
The verdict is decided from the scenario's cluster state and the run's ValidationInput the way
AICR's validator would decide it; unknown checks pass with a generic log.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import yaml

from . import allocmode
from .scenarios import Scenario

CATALOG_CHECKS: Mapping[str, tuple[str, ...]] = {
    "deployment": (
        "operator-health",
        "expected-resources",
        "gpu-operator-version",
        "check-nvidia-smi",
        "gke-gpu-nic-networks",
    ),
    "performance": (
        "nccl-all-reduce-bw",
        "inference-perf",
        "nccl-all-reduce-bw-net",
        "nccl-all-reduce-bw-nvls",
    ),
    "conformance": (
        "dra-support",
        "gang-scheduling",
        "accelerator-metrics",
        "ai-service-metrics",
        "inference-gateway",
        "pod-autoscaling",
        "cluster-autoscaling",
        "robust-controller",
        "secure-accelerator-access",
        "slinky-slurm-health",
        "slinky-slurm-imex-channel",
        "gpu-operator-health",
        "platform-health",
    ),
}


@dataclass
class ContainerRun:
    """How one container run ends. ``log`` is the raw pod log (bytes: it need not be UTF-8)."""

    exit_code: int
    sim_seconds: float
    log: bytes = b""
    message: str = ""  # termination message (written only on fail/skip)
    reason: str = ""  # Completed | Error | OOMKilled (set by the kubelet when empty)
    hang: bool = False  # never terminates on its own (the Job deadline ends it)
    disruption: str = ""  # "" | "evicted" | "node-lost": how the pod ends at sim_seconds


def _slog_value(value: str) -> str:
    if re.fullmatch(r"[A-Za-z0-9_./:-]+", value):
        return value
    return json.dumps(value, ensure_ascii=False)


class _Log:
    """A pod log in the making: slog text lines (stderr) and plain lines (stdout)."""

    def __init__(self, start: datetime) -> None:
        self.clock = start
        self.lines: list[str] = []

    def tick(self, ms: int = 37) -> None:
        self.clock += timedelta(milliseconds=ms)

    def slog(self, level: str, msg: str, **attrs: Any) -> None:
        """A line of Go's slog text handler (values quoted like strconv.Quote when needed)."""
        self.tick()
        stamp = self.clock.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.clock.microsecond // 1000:03d}Z"
        parts = [f"time={stamp}", f"level={level}", f"msg={_slog_value(msg)}"]
        parts += [f"{key}={_slog_value(str(value))}" for key, value in attrs.items()]
        self.lines.append(" ".join(parts))

    def out(self, line: str) -> None:
        self.lines.append(line)

    def extra(self, payload: Mapping[str, str]) -> None:
        self.lines.append("##AICR-EXTRA## " + json.dumps(dict(payload), separators=(",", ":")))

    def bytes(self) -> bytes:
        return ("\n".join(self.lines) + "\n").encode() if self.lines else b""


class Skip(Exception):
    """validators.Skip(reason): exit 2, termination message ``[INTERNAL] <reason>: skip``."""


class Fail(Exception):
    """A coded error: exit 1, termination message ``[CODE] message``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"[{code}] {message}")


@dataclass(frozen=True)
class CheckContext:
    scenario: Scenario
    check: str
    phase: str
    validation: Mapping[str, Any]
    log: _Log
    extras: dict[str, str] = field(default_factory=dict)

    def constraints(self, phase: str | None = None) -> list[Mapping[str, Any]]:
        config = (self.validation.get("config") or {}).get(phase or self.phase) or {}
        return list(config.get("constraints") or [])

    def constraint(self, name: str, phase: str | None = None) -> str | None:
        for constraint in self.constraints(phase):
            if constraint.get("name") == name:
                return str(constraint.get("value", ""))
        return None

    def component_refs(self) -> list[Mapping[str, Any]]:
        return list(self.validation.get("componentRefs") or [])

    def declares(self, component: str) -> bool:
        for ref in self.component_refs():
            if ref.get("name") == component:
                overrides = ref.get("overrides") or {}
                return overrides.get("enabled", True) is not False and ref.get("enabled", True)
        return False

    def criteria(self) -> Mapping[str, Any]:
        return self.validation.get("criteria") or {}


# -- AICR's version rules (AICR-VALIDATE.md §3), as the validator containers apply them ------


def parse_version(text: str) -> tuple[int, ...]:
    value = text.strip().removeprefix("v")
    if match := re.search(r"(?<=\d)[-+]", value):
        value = value[: match.start()]
    parts = value.split(".")
    if not 1 <= len(parts) <= 3 or not all(part.isdigit() for part in parts):
        raise ValueError(f"invalid version {text!r}")
    return tuple(int(part) for part in parts)


def version_satisfies(actual: str, expression: str) -> bool:
    expression = expression.strip()
    for op in (">=", "<=", "!=", "==", ">", "<"):
        if expression.startswith(op):
            expected = expression[len(op) :].strip()
            break
    else:
        op, expected = "", expression
    if not op:
        return actual.strip() == expected
    left, right = parse_version(actual), parse_version(expected)
    precision = min(len(left), len(right))
    left, right = left[:precision], right[:precision]
    return {
        ">=": left >= right,
        "<=": left <= right,
        ">": left > right,
        "<": left < right,
        "==": left == right,
        "!=": left != right,
    }[op]


# -- the checks -------------------------------------------------------------------------------


def _operator_health(ctx: CheckContext) -> None:
    scenario = ctx.scenario
    if not scenario.gpu_operator_version:
        raise Fail("NOT_FOUND", "no gpu-operator pods found")
    pods = ["gpu-operator-6d8f4b7c9-x2kq8"]
    ctx.log.out(f"Found {len(pods)} gpu-operator pod(s):")
    phase = "Running" if scenario.gpu_operator_running else "CrashLoopBackOff"
    for pod in pods:
        ctx.log.out(f"  {pod}: {phase}")
    running = len(pods) if scenario.gpu_operator_running else 0
    ctx.log.out(f"Running: {running}/{len(pods)}")
    if not running:
        raise Fail("INTERNAL", f"no gpu-operator pods are in Running state ({len(pods)} total)")


def _expected_resources(ctx: CheckContext) -> None:
    failed: list[str] = []
    for ref in ctx.component_refs():
        name = ref.get("name", "")
        if not ctx.declares(name):
            continue
        namespace = ref.get("namespace") or name
        installed = name in ctx.scenario.components
        for expected in ref.get("expectedResources") or [{"kind": "Namespace", "name": namespace}]:
            kind, res_name = expected.get("kind", ""), expected.get("name", "")
            where = expected.get("namespace") or namespace
            if installed:
                ctx.log.out(f"  ✓ {kind} {where}/{res_name}")
            else:
                failed.append(f"{kind} {where}/{res_name}: not found")
    if failed:
        ctx.log.out("Failed resources:")
        for line in failed:
            ctx.log.out(f"  - {line}")
        raise Fail("NOT_FOUND", f"{len(failed)} expected resource(s) not healthy")
    ctx.log.out("All deployment resources and required readiness signals are healthy")


def _gpu_operator_version(ctx: CheckContext) -> None:
    version = ctx.scenario.gpu_operator_version
    if not version:
        raise Fail("NOT_FOUND", "failed to detect GPU operator version")
    version = "v" + version.removeprefix("v")
    ctx.log.out(f"Detected GPU Operator version: {version}")
    expression = ctx.constraint("Deployment.gpu-operator.version", "deployment")
    if expression is None:
        raise Skip(f"no Deployment.gpu-operator.version constraint in recipe; detected {version}")
    try:
        ok = version_satisfies(version, expression)
    except ValueError as error:
        raise Fail("INVALID_REQUEST", f"invalid constraint {expression!r}: {error}") from error
    ctx.log.out(f"Constraint: {expression} → {'true' if ok else 'false'}")
    if not ok:
        raise Fail(
            "INTERNAL", f'GPU Operator version {version} does not satisfy constraint "{expression}"'
        )


def _check_nvidia_smi(ctx: CheckContext) -> None:
    nodes = ctx.scenario.gpu_nodes()
    cordoned = [node for node in nodes if node.unschedulable]
    schedulable = [node for node in nodes if not node.unschedulable]
    ctx.log.out(
        f"Found {len(nodes)} GPU node(s), {len(schedulable)} schedulable, {len(cordoned)} cordoned:"
    )
    for node in nodes:
        ctx.log.out(f"  {node.name}{' (cordoned)' if node.unschedulable else ''}")
    if not nodes:
        if ctx.declares("gpu-operator"):
            raise Fail(
                "NOT_FOUND",
                "recipe declares gpu-operator but the cluster has no GPU nodes to verify — "
                "check that the GPU operator's device plugin advertises nvidia.com/gpu",
            )
        ctx.extras["skipReason"] = "no-gpu-nodes"
        raise Skip("no GPU nodes found in the cluster")
    if not schedulable:
        ctx.extras["skipReason"] = "no-schedulable-gpu-nodes"
        raise Skip(f"all {len(cordoned)} GPU node(s) are cordoned; nothing to verify")
    for node in schedulable:
        pod = "nvidia-smi-verify-" + node.name.lower().replace(".", "-")
        ctx.log.slog("INFO", "verifying GPU", node=node.name, pod=pod)
        ctx.log.out(
            f"[{node.name}] NVIDIA-SMI 580.95.05   Driver Version: 580.95.05   CUDA Version: 13.0"
        )
        ctx.log.out(f"[{node.name}] GPU_CHECK_SUCCESS")
    suffix = f" ({len(cordoned)} cordoned, skipped)" if cordoned else ""
    ctx.extras.update(nodesValidated=str(len(schedulable)), nodesTotal=str(len(nodes)))
    ctx.log.out(f"RESULT: nodesValidated: {len(schedulable)}/{len(nodes)}{suffix}")
    ctx.log.out(f"Successfully verified GPU on all {len(schedulable)} schedulable node(s)")


def _gke_gpu_nic_networks(ctx: CheckContext) -> None:
    if not ctx.declares("gke-nccl-tcpxo"):
        raise Skip("gke-nccl-tcpxo not declared in recipe — GPU NIC networks are inapplicable")
    ctx.log.out("Found GKE GPU NIC networks: vpc1, vpc2, vpc3, vpc4, vpc5, vpc6, vpc7, vpc8")


def _dra_support(ctx: CheckContext) -> None:
    scenario = ctx.scenario
    if ctx.component_refs() and not ctx.declares("nvidia-dra-driver-gpu"):
        raise Skip(
            "recipe excludes or disables the nvidia-dra-driver-gpu component — DRA is out of "
            "scope for this recipe"
        )
    if not ctx.component_refs() and not scenario.dra_driver_installed:
        raise Skip(
            "NVIDIA DRA driver not installed — no pods, no Deployment nvidia-dra-driver-gpu-"
            "controller, no DaemonSet nvidia-dra-driver-gpu-kubelet-plugin in namespace "
            "nvidia-dra-driver (no recipe componentRefs available; live detection)"
        )
    if not scenario.resource_api_versions:
        raise Fail(
            "SERVICE_UNAVAILABLE",
            "no served resource.k8s.io API version (tried v1, v1beta2, v1beta1)",
        )
    ctx.log.out(f"--- resource.k8s.io ---\nserved version: {scenario.resource_api_versions[0]}")
    if not scenario.dra_driver_installed:
        raise Fail(
            "NOT_FOUND",
            'Deployment "nvidia-dra-driver-gpu-controller" not found in namespace '
            '"nvidia-dra-driver"',
        )
    # The driver's ComputeDomain slices (and, with resources.gpus.enabled, its gpu.nvidia.com
    # ones) live on the GPU nodes whose driver the operator loaded.
    nodes = scenario.driver_gpu_nodes()
    if not nodes:
        raise Fail("NOT_FOUND", "no ResourceSlice of an NVIDIA DRA driver with a usable device")
    ctx.log.out("--- DRA driver ---")
    ctx.log.out("controller: nvidia-dra-driver-gpu-controller 1/1 available")
    ctx.log.out(
        f"kubelet-plugin: nvidia-dra-driver-gpu-kubelet-plugin {len(nodes)}/{len(nodes)} ready"
    )
    ctx.log.out("--- ResourceSlices ---")
    for node in nodes:
        ctx.log.out(f"{node.name}-compute-domain.nvidia.com: 1 device(s)")
        if scenario.dra_full_gpu:
            ctx.log.out(f"{node.name}-gpu.nvidia.com: {node.gpus} device(s)")
    # VERIFY the configured policy, then run the full-GPU subtest only where it applies
    # (runDRABehavioralSubtests in dra_support_check.go).
    mode, policy = _allocation(ctx)
    if policy == allocmode.DEVICE_PLUGIN:
        ctx.log.out(
            "--- Behavioral GPU allocation ---\nskipped (not applicable): configured GPU "
            f"allocation policy is {policy} — whole GPUs are device-plugin-allocated, so the "
            "full-GPU DRA behavioral subtest does not apply; DRA validated via driver health "
            f"and validated ResourceSlices. {mode.dra_detail}"
        )
        return
    if not mode.dra_usable:
        ctx.log.out(
            "--- Behavioral GPU allocation ---\nskipped (not applicable): full-GPU DRA not "
            "enabled; behavioral allocation not applicable — DRA validated via driver health "
            f"and validated ResourceSlices. {mode.dra_detail}"
        )
        return
    ctx.log.out(
        "--- allocation test ---\nResourceClaim gpu-claim allocated; pod gpu-alloc-test Succeeded"
        f" on {mode.dra_nodes[0]}"
    )


def _allocation(ctx: CheckContext) -> tuple[allocmode.Mode, str]:
    """Inspect the GPU allocation mode and verify the validation.yaml's policy against it,
    evidence first (a mismatch still leaves both in the log)."""
    mode = allocmode.detect(ctx.scenario)
    policy = allocmode.policy_of(ctx.validation)
    ctx.log.out(f"--- GPU allocation policy ---\nconfigured policy: {policy}")
    ctx.log.out(f"--- GPU allocation mode ---\n{mode.summary()}")
    try:
        allocmode.verify(policy, mode)
    except allocmode.PolicyMismatch as exc:
        raise Fail("INVALID_REQUEST", str(exc)) from None
    return mode, policy


def _secure_accelerator_access(ctx: CheckContext) -> None:
    """secure_access_check.go: VERIFY, then exercise the configured mechanism (unspecified:
    whichever the cluster offers, DRA first)."""
    mode, policy = _allocation(ctx)
    dra = policy == allocmode.DRA_RESOURCE_CLAIM or (
        policy == allocmode.UNSPECIFIED and mode.dra_usable
    )
    plugin = policy == allocmode.DEVICE_PLUGIN or (
        policy == allocmode.UNSPECIFIED and mode.plugin_usable
    )
    if dra:
        ctx.log.out(
            "--- Secure access mode ---\nmode exercised: DRA (gpu.nvidia.com ResourceClaim)"
        )
        node = mode.dra_nodes[0]
    elif plugin:
        ctx.log.out(
            "--- Secure access mode ---\nmode exercised: device plugin (nvidia.com/gpu limits)"
        )
        node = mode.plugin_nodes[0]
    else:
        raise Fail(
            "SERVICE_UNAVAILABLE",
            "no usable GPU allocation mechanism for the secure accelerator access test: "
            f"{mode.dra_detail}; {mode.plugin_detail}",
        )
    ctx.log.out(
        f"granted container: exactly one GPU visible on {node}; unauthorized container: no GPU "
        "visible, exit 0"
    )


def _accelerator_metrics(ctx: CheckContext) -> None:
    url = "http://nvidia-dcgm-exporter.gpu-operator.svc:9400/metrics"
    # The exporter is a DaemonSet on GPU nodes: without one the Service has no endpoint.
    if not (ctx.scenario.dcgm_exporter and ctx.scenario.driver_gpu_nodes()):
        raise Fail(
            "SERVICE_UNAVAILABLE",
            f'failed to reach {url}: Get "{url}": dial tcp: lookup nvidia-dcgm-exporter.'
            "gpu-operator.svc on 172.20.0.10:53: no such host",
        )
    ctx.log.out("Sample (first 8 lines):")
    for metric in ("GPU_UTIL", "FB_USED", "GPU_TEMP", "POWER_USAGE"):
        ctx.log.out(f'DCGM_FI_DEV_{metric}{{gpu="0",modelName="NVIDIA H100 80GB HBM3"}} 0')
    for metric in ("GPU_UTIL", "FB_USED", "GPU_TEMP", "POWER_USAGE"):
        ctx.log.out(f"  DCGM_FI_DEV_{metric:<12} FOUND")


_NCCL_MATRIX = {
    "nccl-all-reduce-bw": {
        ("eks", "h100"),
        ("eks", "h200"),
        ("gke", "h100"),
        ("aks", "h100"),
        ("any", "b200"),
        ("any", "gb200"),
    },
    "nccl-all-reduce-bw-net": {("eks", "gb200")},
    "nccl-all-reduce-bw-nvls": {("eks", "gb200"), ("oke", "gb200")},
}


_NCCL_VARIANT = {
    "nccl-all-reduce-bw": "default",
    "nccl-all-reduce-bw-net": "NET",
    "nccl-all-reduce-bw-nvls": "NVLS",
}
# knownBenchmarkProfiles: every "<accelerator>/<service>" of the compiled matrix.
_PROFILES = sorted({f"{acc}/{svc}" for pairs in _NCCL_MATRIX.values() for svc, acc in pairs})
_RUNTIME, _RUNTIME_REF, _PROFILE = (
    "nccl-benchmark-runtime",
    "nccl-benchmark-runtime-ref",
    "nccl-benchmark-profile",
)


def _benchmark_runtime(ctx: CheckContext) -> str | None:
    """resolveNCCLBenchmarkRuntime (nccl_benchmark_runtime.go): the recipe-supplied
    TrainingRuntime the orchestrator lowered from its runtime ref, shape-checked; a ref that
    arrives unresolved fails closed."""
    for name in (_RUNTIME, _RUNTIME_REF):
        count = sum(1 for c in ctx.constraints("performance") if c.get("name") == name)
        if count > 1:
            raise Fail("INVALID_REQUEST", f"declare at most one {name} constraint (found {count})")
    carrier = (ctx.constraint(_RUNTIME, "performance") or "").strip()
    if not carrier:
        ref = (ctx.constraint(_RUNTIME_REF, "performance") or "").strip()
        if ref:
            raise Fail(
                "INVALID_REQUEST",
                f'{_RUNTIME_REF}="{ref}" reached the validator unresolved: the orchestrator must '
                f"lower it into {_RUNTIME} before the pod runs",
            )
        return None
    try:
        runtime = yaml.safe_load(carrier)
    except yaml.YAMLError as exc:
        raise Fail("INVALID_REQUEST", f"invalid {_RUNTIME}: not parseable as YAML: {exc}") from None
    runtime = runtime if isinstance(runtime, dict) else {}
    api_version, kind = runtime.get("apiVersion", ""), runtime.get("kind", "")
    if (api_version, kind) != ("trainer.kubeflow.org/v1alpha1", "TrainingRuntime"):
        raise Fail(
            "INVALID_REQUEST",
            f"invalid {_RUNTIME}: must be a trainer.kubeflow.org/v1alpha1 TrainingRuntime "
            f'(got apiVersion="{api_version}" kind="{kind}")',
        )
    jobs = ((runtime.get("spec") or {}).get("template") or {}).get("spec") or {}
    if not any(
        isinstance(job, dict) and job.get("name") == "node"
        for job in jobs.get("replicatedJobs") or ()
    ):
        raise Fail(
            "INVALID_REQUEST",
            f'invalid {_RUNTIME}: must declare a "node" replicatedJob '
            "(spec.template.spec.replicatedJobs) — the NCCL worker cohort",
        )
    return carrier


def _benchmark_profile(ctx: CheckContext) -> tuple[str, str] | None:
    """resolveNCCLBenchmarkProfile: ``"<accelerator>/<service>"`` borrowing an embedded
    template (normalised; malformed or unknown fails closed). The two error texts are inferred
    from AICR's tests (nccl_benchmark_profile.go is not in the reference material)."""
    raw = (ctx.constraint(_PROFILE, "performance") or "").strip()
    if not raw:
        return None
    parts = [part.strip().lower() for part in raw.split("/")]
    if len(parts) != 2 or not all(parts):
        raise Fail(
            "INVALID_REQUEST",
            f'invalid {_PROFILE} "{raw}": must be "{{accelerator}}/{{service}}" (e.g. "gb200/eks")',
        )
    profile = "/".join(parts)
    if profile not in _PROFILES:
        raise Fail(
            "INVALID_REQUEST",
            f'unknown {_PROFILE} "{raw}"; available profiles: {", ".join(_PROFILES)}',
        )
    return parts[1], parts[0]


def _nccl(ctx: CheckContext) -> None:
    threshold = ctx.constraint(ctx.check, "performance")
    if threshold is None:
        raise Skip(f"no {ctx.check} constraint in recipe")
    supported = _NCCL_MATRIX[ctx.check]
    if _benchmark_runtime(ctx) is not None:
        # The recipe brings its own runtime: the compiled matrix is bypassed.
        ctx.log.slog("INFO", "rendering the recipe-supplied benchmark runtime", constraint=_RUNTIME)
    elif (profile := _benchmark_profile(ctx)) is not None:
        if profile not in supported:
            raise Skip(
                f"skipped - benchmark profile {profile[1]}/{profile[0]} does not implement the "
                f"{_NCCL_VARIANT[ctx.check]} NCCL variant"
            )
    else:
        criteria = ctx.criteria()
        service, accelerator = criteria.get("service", ""), criteria.get("accelerator", "")
        if (service, accelerator) not in supported and ("any", accelerator) not in supported:
            raise Skip("skipped - requires Service + Accelerator to be implemented")
    nodes = [node for node in ctx.scenario.gpu_nodes() if not node.unschedulable]
    if len(nodes) < 2:
        raise Fail(
            "NOT_FOUND",
            f"recipe declares the {ctx.check} NCCL benchmark but the cluster has fewer than 2 "
            f"GPU nodes ({len(nodes)} found)",
        )
    ctx.log.slog("INFO", "deploying TrainingRuntime", name="nccl-all-reduce-runtime")
    ctx.log.slog("INFO", "deploying TrainJob", name="nccl-all-reduce-tj", nodes=len(nodes))
    busbw = ctx.scenario.nccl_busbw_gbps
    ctx.log.out(
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
    )
    for size, factor in ((1073741824, 0.93), (4294967296, 0.98), (17179869184, 1.0)):
        bw = busbw * factor
        algbw = bw / 1.875
        time_us = size / (algbw * 1e3)
        ctx.log.out(
            f" {size:>12} {size // 4:>13}     float     sum      -1 {time_us:>8.1f} "
            f"{algbw:>7.2f} {bw:>7.2f}      0 {time_us:>8.1f} {algbw:>7.2f} {bw:>7.2f}      0"
        )
    value = float(threshold.lstrip("><=! ").split()[0])
    ok = busbw >= 0.9 * value
    ctx.log.out(f"NCCL All Reduce bandwidth ({ctx.check}): {busbw:.2f} GB/s")
    ctx.log.out(f"Constraint: {threshold} → {'true' if ok else 'false'}")
    if not ok:
        raise Fail(
            "INTERNAL", f'NCCL bandwidth {busbw:.2f} GB/s does not satisfy constraint "{threshold}"'
        )


def _inference_perf(ctx: CheckContext) -> None:
    if ctx.constraint("inference-throughput", "performance") is None:
        raise Skip("no inference-throughput constraint in recipe")
    # inference_perf_constraint.go: VERIFY the policy, then discover worker nodes by it.
    mode = allocmode.detect(ctx.scenario)
    policy = allocmode.policy_of(ctx.validation)
    ctx.log.out(f"--- GPU allocation policy ---\nconfigured policy: {policy}\n{mode.summary()}")
    try:
        allocmode.verify(policy, mode)
    except allocmode.PolicyMismatch as exc:
        raise Fail("INVALID_REQUEST", str(exc)) from None
    if policy == allocmode.DRA_RESOURCE_CLAIM:
        node, wiring = mode.dra_nodes[0], "DRA (gpu.nvidia.com ResourceClaimTemplate)"
    elif mode.plugin_nodes:
        node, wiring = mode.plugin_nodes[0], "device plugin (resources.limits nvidia.com/gpu)"
    elif mode.dra_nodes:
        raise Fail(
            "INVALID_REQUEST",
            f"no schedulable GPU node advertises scalar nvidia.com/gpu, but {len(mode.dra_nodes)} "
            f"node(s) carry usable full-GPU DRA devices ({','.join(mode.dra_nodes)}) — a DRA-only "
            "cluster is not supported by AICR validation without a recipe-configured "
            "dra-resource-claim policy (experimental; see issue #1327)",
        )
    else:
        raise Fail("INTERNAL", "no schedulable GPU nodes found")
    ctx.log.out(
        f"--- GPU allocation mode (worker GPU wiring) ---\n{mode.summary()}\nworker GPU wiring: "
        f"{wiring} (node-local decision for {node})"
    )
    ctx.log.out("RESULT: Inference throughput: 5120.40 tokens/sec")
    ctx.log.out("RESULT: Inference TTFT p99: 182.10 ms")


def _needs_component(component: str, subject: str) -> Callable[[CheckContext], None]:
    def check(ctx: CheckContext) -> None:
        if not ctx.declares(component):
            raise Skip(f"{component} not declared in recipe — {subject} is inapplicable")
        if component not in ctx.scenario.components:
            raise Fail("NOT_FOUND", f"{component} declared in recipe but not installed")
        ctx.log.out(f"{subject}: {component} {ctx.scenario.components[component]} is serving")

    return check


def _gpu_workload(ctx: CheckContext) -> None:
    """Conformance checks that schedule GPU workloads: they need a schedulable GPU node."""
    if not [node for node in ctx.scenario.gpu_nodes() if not node.unschedulable]:
        raise Fail("NOT_FOUND", "no schedulable GPU nodes for the test workload")
    ctx.log.out(f"{ctx.check}: test workload completed on {ctx.scenario.gpu_nodes()[0].name}")


def _generic(ctx: CheckContext) -> None:
    ctx.log.out(f"{ctx.check}: no simulated rule; reporting pass (SIMULATED)")


CHECKS: Mapping[str, Callable[[CheckContext], None]] = {
    "operator-health": _operator_health,
    "gpu-operator-health": _operator_health,
    "expected-resources": _expected_resources,
    "gpu-operator-version": _gpu_operator_version,
    "check-nvidia-smi": _check_nvidia_smi,
    "gke-gpu-nic-networks": _gke_gpu_nic_networks,
    "dra-support": _dra_support,
    "accelerator-metrics": _accelerator_metrics,
    "nccl-all-reduce-bw": _nccl,
    "nccl-all-reduce-bw-net": _nccl,
    "nccl-all-reduce-bw-nvls": _nccl,
    "inference-perf": _inference_perf,
    "gang-scheduling": _gpu_workload,
    "secure-accelerator-access": _secure_accelerator_access,
    "robust-controller": _gpu_workload,
    "ai-service-metrics": _needs_component("kube-prometheus-stack", "AI service metrics"),
    "pod-autoscaling": _needs_component("prometheus-adapter", "custom-metrics pod autoscaling"),
    "inference-gateway": _needs_component("agentgateway", "the inference gateway"),
    "slinky-slurm-health": _needs_component("slinky-slurm-operator", "Slinky Slurm"),
    "slinky-slurm-imex-channel": _needs_component(
        "slinky-slurm-operator", "the Slurm IMEX channel"
    ),
}


def _hostile_log(log: _Log, megabytes: float) -> bytes:
    """Megabytes of log with every kind of input a reader must survive."""
    hostile = [
        "<script>alert('xss')</script><img src=x onerror=alert(1)>",
        "##AICR-EXTRA## not json at all",
        '##AICR-EXTRA## {"nodesValidated": 5}',
        '##AICR-EXTRA## ["array", "not", "object"]',
        '##AICR-EXTRA## {"nested": {"a": "b"}}',
        "##AICR-EXTRA## " + json.dumps({"skipReason": "x" * 100_000}),
        "RESULT: </pre><h1>forged</h1>",
        "é" * 400 + "→" * 100,  # > 512 bytes, multibyte characters across the cut
        "\u202e\u2028\u2029 bidi + line separators",
    ]
    text = "\n".join(log.lines + hostile).encode()
    filler = b"".join(
        f"line {index:07d} ".encode() + b"\xff\xfe\xc3(" + b"x" * 100 + b"\n"
        for index in range(int(megabytes * 1024 * 1024 / 120))
    )
    # Last: NUL (valid UTF-8 that PostgreSQL text cannot hold) and, in the extra that wins, a
    # lone surrogate escape (json.loads keeps it; nothing can encode it as UTF-8).
    tail = (
        b"a NUL \x00 byte in the last lines\n"
        b'\n##AICR-EXTRA## {"nodesValidated":"2","nodesTotal":"2","note":"<b>bold</b>\\ud800"}\n'
        b"RESULT: nodesValidated: 2/2\n"
    )
    return text + b"\n" + filler + tail


def run_validator(
    scenario: Scenario,
    *,
    check: str | None,
    phase: str,
    validation_yaml: str | None,
    started: datetime,
) -> ContainerRun:
    """The validator container of AICR's ``<phase>`` image, given ``args[0]`` = ``check``."""
    log = _Log(started)
    if not check:
        return ContainerRun(
            1, 0.1, b"usage: /" + phase.encode() + b" <check>\n", f"usage: /{phase} <check>"
        )
    if check not in CATALOG_CHECKS.get(phase, ()):
        message = f"unknown check: {check}"
        return ContainerRun(1, 0.1, (message + "\n").encode(), message)
    try:
        validation = yaml.safe_load(validation_yaml or "") or {}
    except yaml.YAMLError as error:
        validation = None
        load_error = str(error).splitlines()[0]
    if not isinstance(validation, Mapping):
        message = "[INTERNAL] failed to load context: cannot parse validation input" + (
            f": {load_error}" if validation is None else ""
        )
        log.slog("ERROR", "FAIL", message=message)
        return ContainerRun(1, 0.2, log.bytes(), message)
    log.slog("INFO", "starting check", name=check)
    ctx = CheckContext(scenario, check, phase, validation, log)
    exit_code, message = 0, ""
    try:
        CHECKS.get(check, _generic)(ctx)
    except Skip as skip:
        exit_code, message = 2, f"[INTERNAL] {skip}: skip"
    except Fail as failure:
        exit_code, message = 1, str(failure)
    seconds = scenario.sim_seconds(check)
    if check in scenario.oom_checks:
        # The kernel kills the container mid-check: half its output, no verdict, no message.
        log.lines = log.lines[: max(1, len(log.lines) // 2)]
        return ContainerRun(137, seconds / 2, log.bytes(), "", "OOMKilled")
    if check in scenario.evicted_checks or check in scenario.node_lost_checks:
        # Killed from outside half-way: no verdict line; the kubelet writes the pod's fate.
        evicted = check in scenario.evicted_checks
        return ContainerRun(
            137,
            seconds / 2,
            log.bytes(),
            "The container could not be located when the pod was terminated" if evicted else "",
            "ContainerStatusUnknown",
            disruption="evicted" if evicted else "node-lost",
        )
    if check in scenario.hang_checks:
        # Still working when the deadline (or a wait budget) ends it: no verdict line yet.
        log.slog("INFO", "waiting for the check to converge", name=check)
        return ContainerRun(exit_code, seconds, log.bytes(), message, hang=True)
    log.clock = max(log.clock, started + timedelta(seconds=max(seconds - 0.2, 0.1)))
    if exit_code == 2:
        log.slog("INFO", "SKIP", reason=message)
    elif exit_code == 1:
        log.slog("ERROR", "FAIL", message=message)
    if ctx.extras:
        log.extra(ctx.extras)  # noqa: S610 - the AICR sentinel line, not Django's extra()
    body = log.bytes()
    if scenario.huge_logs and check in scenario.huge_logs.checks:
        body = _hostile_log(log, scenario.huge_logs.megabytes)
    return ContainerRun(exit_code, seconds, body, message)


def run_agent(scenario: Scenario, *, started: datetime, snapshot_target: str) -> ContainerRun:
    """AICR's snapshot agent: collectors, then the ConfigMap write (done by the kubelet)."""
    log = _Log(started)
    log.slog("INFO", "starting snapshot", prefix="agent", output=snapshot_target)
    for collector in ("k8s", "systemd", "os", "gpu", "topology", "network"):
        if scenario.agent_hangs and collector == "gpu":
            log.slog("INFO", "waiting for collector", collector=collector)
            return ContainerRun(0, 8.0, log.bytes(), hang=True)
        log.slog("INFO", "collector finished", collector=collector)
    if scenario.agent_failure:
        log.slog("ERROR", "snapshot failed", prefix="agent", error=scenario.agent_failure)
        return ContainerRun(1, 8.0, log.bytes(), scenario.agent_failure)
    log.slog("INFO", "snapshot written", output=snapshot_target)
    return ContainerRun(0, 8.0, log.bytes())
