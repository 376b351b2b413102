"""What AICR's validator containers see of GPU allocation on a simulated cluster, and how they
verify the recipe's ``gpuAllocationPolicy`` against it (AICR #1327).

A port of ``validators/internal/allocmode`` (``Detect``, ``Mode.Summary``, ``Verify``) over the
scenario's state instead of API reads: the device plugin advertises allocatable
``nvidia.com/gpu`` on Ready, schedulable GPU nodes (``Scenario.device_plugin``), and full-GPU DRA
is usable when the DRA driver publishes the ``gpu.nvidia.com`` DeviceClass and ResourceSlices
(``Scenario.dra_full_gpu``, i.e. ``resources.gpus.enabled=true``) on a served
``resource.k8s.io``. The texts are AICR's. The consumers are ``dra-support``,
``secure-accelerator-access`` and ``inference-perf`` in ``containers.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from validators_app.orchestrator import allocation

from .scenarios import Scenario

# The policy names: one vocabulary for both ends, as AICR's pkg/validator/v1 is for its
# orchestrator and its validator images.
UNSPECIFIED = allocation.POLICY_UNSPECIFIED
DEVICE_PLUGIN = allocation.POLICY_DEVICE_PLUGIN
DRA_RESOURCE_CLAIM = allocation.POLICY_DRA_RESOURCE_CLAIM
DRA_EXTENDED_RESOURCE = allocation.POLICY_DRA_EXTENDED_RESOURCE
GPU = "nvidia.com/gpu"
DRA_DRIVER = "gpu.nvidia.com"


class PolicyMismatch(Exception):
    """``allocmode.Verify``'s ``ErrCodeInvalidRequest``; the message is AICR's."""


@dataclass(frozen=True)
class Mode:
    api_version: str
    dra_nodes: tuple[str, ...]
    dra_detail: str
    plugin_nodes: tuple[str, ...]
    plugin_detail: str
    extended_resource_detail: str
    node_local_gpu_slices: Mapping[str, int]

    @property
    def dra_usable(self) -> bool:
        return bool(self.dra_nodes)

    @property
    def plugin_usable(self) -> bool:
        return bool(self.plugin_nodes)

    def summary(self) -> str:
        """``Mode.Summary``: the evidence block every consumer prints."""
        lines = [
            f"DRA ({DRA_DRIVER}):              usable={_go_bool(self.dra_usable)} "
            f"nodes=[{','.join(self.dra_nodes)}]",
            f"Device plugin ({GPU}):  usable={_go_bool(self.plugin_usable)} "
            f"nodes=[{','.join(self.plugin_nodes)}]",
            self.dra_detail,
            self.plugin_detail,
        ]
        if self.extended_resource_detail:
            lines.append(self.extended_resource_detail)
        lines.append(
            "note: node eligibility is Ready+uncordoned only — node taints are not evaluated; "
            "workloads must tolerate any node taints"
        )
        dual = sorted(set(self.dra_nodes) & set(self.plugin_nodes))
        if dual:
            lines.append(
                f"WARNING: both mechanisms advertise GPUs on node(s) [{','.join(dual)}] — GPU "
                "over-admission risk"
            )
        if self.node_local_gpu_slices:
            counts = ",".join(f"{n}={c}" for n, c in sorted(self.node_local_gpu_slices.items()))
            lines.append(
                f"node-local raw {DRA_DRIVER} ResourceSlice devices (unvalidated, "
                f"kai-attributable): [{counts}] — kai-scheduler rejects scalar device-plugin GPU "
                "pods on these nodes"
            )
        return "\n".join(lines)


def detect(scenario: Scenario) -> Mode:
    """``allocmode.Detect``: both mechanisms on Ready, uncordoned nodes."""
    plugin = tuple(sorted(n.name for n in scenario.gpu_nodes() if not n.unschedulable))
    plugin_detail = (
        f"device plugin usable: {len(plugin)} Ready, schedulable node(s) with allocatable {GPU}"
        if plugin
        else f"device plugin not usable: no Ready, schedulable node advertises allocatable {GPU}"
    )
    version = scenario.resource_api_versions[0] if scenario.resource_api_versions else ""
    if not version:
        return Mode(
            "",
            (),
            "full-GPU DRA not usable: no served resource.k8s.io API version — DeviceClass "
            f"{DRA_DRIVER} unreachable",
            plugin,
            plugin_detail,
            f"extended-resource attribution: DRA API not served — {GPU} cannot be DRA-backed",
            {},
        )
    publishing = scenario.dra_driver_installed and scenario.dra_full_gpu
    slices = {n.name: n.gpus for n in scenario.driver_gpu_nodes()} if publishing else {}
    usable = tuple(sorted(n.name for n in scenario.driver_gpu_nodes() if not n.unschedulable))
    if not publishing:
        dra_nodes: tuple[str, ...] = ()
        detail = f"full-GPU DRA not usable: DeviceClass {DRA_DRIVER} not found"
    elif not slices:
        dra_nodes = ()
        detail = (
            f"full-GPU DRA not usable: DeviceClass {DRA_DRIVER} exists but no ResourceSlices "
            f"from driver {DRA_DRIVER}"
        )
    elif not usable:
        dra_nodes = ()
        detail = (
            f"full-GPU DRA not usable: DeviceClass {DRA_DRIVER} exists but no complete, "
            "current-generation ResourceSlice pool advertises an untainted device on a Ready, "
            "schedulable node"
        )
    else:
        dra_nodes = usable
        detail = (
            f"full-GPU DRA usable: DeviceClass {DRA_DRIVER} exists (resource.k8s.io/{version}) "
            f"and {len(usable)} Ready, schedulable node(s) have advertised devices"
        )
    return Mode(
        version,
        dra_nodes,
        detail,
        plugin,
        plugin_detail,
        f"extended-resource attribution: no DeviceClass maps {GPU} to DRA",
        slices,
    )


def policy_of(validation: Mapping[str, Any]) -> str:
    """``ValidationInput.GetGPUAllocationPolicy``: empty means ``unspecified``."""
    return str(validation.get("gpuAllocationPolicy") or "") or UNSPECIFIED


def verify(policy: str, mode: Mode) -> None:
    """``allocmode.Verify``: a configured policy the cluster cannot serve fails closed."""
    observed = mode.summary()
    if policy == UNSPECIFIED:
        return
    if policy == DRA_RESOURCE_CLAIM:
        if not mode.dra_usable:
            raise PolicyMismatch(
                f'GPU allocation policy mismatch: the recipe configures "{policy}" but the '
                f"cluster has no usable full-GPU DRA ({DRA_DRIVER} DeviceClass + validated "
                f"ResourceSlices).\nObserved state:\n{observed}\nLikely cause: the cluster has "
                "drifted from the recipe (DRA driver not deployed with resources.gpus.enabled, "
                "or its ResourceSlices are unhealthy) — redeploy the bundle or fix the recipe "
                "(issue #1327)"
            )
        return
    if policy == DEVICE_PLUGIN:
        if not mode.plugin_usable:
            raise PolicyMismatch(
                f'GPU allocation policy mismatch: the recipe configures "{policy}" but no Ready, '
                f"schedulable node advertises allocatable {GPU}.\nObserved state:\n{observed}\n"
                "Likely cause: the cluster has drifted from the recipe (device plugin disabled "
                "or unhealthy on the GPU nodes) — redeploy the bundle or fix the recipe "
                "(issue #1327)"
            )
        return
    if policy == DRA_EXTENDED_RESOURCE:
        raise PolicyMismatch(
            f'GPU allocation policy "{policy}" is reserved (KEP-5004 mapped extended resource) '
            "and not yet validated by AICR (issue #1327)"
        )
    raise PolicyMismatch(
        f'unknown GPU allocation policy "{policy}" (valid: {UNSPECIFIED}, {DEVICE_PLUGIN}, '
        f"{DRA_RESOURCE_CLAIM})"
    )


def _go_bool(value: bool) -> str:
    return "true" if value else "false"
