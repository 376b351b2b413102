"""Simulated cluster states: what the nodes, versions and installed operators are, and how the
API server and the validator containers misbehave.

Every scenario is SIMULATED data, not a measurement of a real cluster. The healthy one is chosen
so that AICR's ``h100-eks-ubuntu-training-kubeflow`` recipe passes readiness (K8s ``>= 1.32.4``,
``OS.release.ID == ubuntu``, ``VERSION_ID == 24.04``, kernel ``>= 6.8``) and its validation
constraints (GPU operator ``>= v24.6.0``, NCCL bus bandwidth ``>= 300`` GB/s within 10 %).

Derive variants with ``dataclasses.replace(SCENARIOS["healthy-h100-eks"], ...)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType


@dataclass(frozen=True)
class Node:
    name: str
    instance_type: str = "p5.48xlarge"
    gpus: int = 8  # physical GPUs (PCI); allocatable only while the GPU operator runs
    gpu_product: str = "NVIDIA-H100-80GB-HBM3"
    unschedulable: bool = False
    zone: str = "us-east-1a"
    extra_labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Mapping[str, str], ...] = ()


@dataclass(frozen=True)
class ApiFaults:
    """Requests that answer an error instead of being served.

    ``first_n``: the first N matching requests fail; ``probability``: each later one fails with
    that chance (seeded, so a test is repeatable); ``path_contains``: only requests whose path
    contains this string count (``""`` = all); ``methods``: only these HTTP methods count
    (``()`` = all; e.g. ``("GET",)`` fails a Job's reads and watches, not its apply or delete).
    429 answers carry ``Retry-After``.
    """

    status: int = 500
    first_n: int = 0
    probability: float = 0.0
    path_contains: str = ""
    methods: tuple[str, ...] = ()
    retry_after_s: int = 1
    seed: int = 7


@dataclass(frozen=True)
class WatchFaults:
    """Watches that end early: after ``max_events`` events or ``max_seconds`` of wall time,
    and/or with a ``410 Gone`` (Expired) error event on every ``gone_every``-th watch."""

    max_events: int | None = None
    max_seconds: float | None = None
    gone_every: int | None = None


@dataclass(frozen=True)
class HugeLogs:
    """Make these checks' logs hostile: megabytes, invalid UTF-8, forged extras, HTML."""

    checks: tuple[str, ...] = ("operator-health",)
    megabytes: float = 3.0


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    nodes: tuple[Node, ...]
    kubernetes_version: str = "v1.33.5-eks-113cf36"
    go_version: str = "go1.24.6"
    platform: str = "linux/amd64"
    provider: str = "aws"
    os_release: Mapping[str, str] = field(
        default_factory=lambda: {
            "ID": "ubuntu",
            "ID_LIKE": "debian",
            "NAME": "Ubuntu",
            "PRETTY_NAME": "Ubuntu 24.04.3 LTS",
            "VERSION": "24.04.3 LTS (Noble Numbat)",
            "VERSION_CODENAME": "noble",
            "VERSION_ID": "24.04",
        }
    )
    kernel: str = "6.8.0-1015-aws"
    container_runtime: str = "containerd://2.0.5"
    # How the runtime writes containerStatuses[].imageID (k8s_sim.images.RUNTIME_FORMS) and the
    # digests its registry serves per image reference (unlisted: derived from the reference).
    image_id_form: str = "containerd"
    image_digests: Mapping[str, str] = field(default_factory=dict)
    gpu_operator_version: str | None = "v26.3.3"  # None: not installed
    gpu_operator_running: bool = True
    dra_driver_installed: bool = True
    # How whole GPUs are advertised (AICR #1327): the GPU operator's device plugin (allocatable
    # nvidia.com/gpu), and/or the DRA driver's gpu.nvidia.com DeviceClass + ResourceSlices
    # (its resources.gpus.enabled=true). The driver's ComputeDomain slices exist either way.
    device_plugin: bool = True
    dra_full_gpu: bool = False
    resource_api_versions: tuple[str, ...] = ("v1", "v1beta2", "v1beta1")
    dcgm_exporter: bool = True
    # Installed components (Helm release name -> version): the versions AICR's catalog (main-08)
    # pins for h100-eks-ubuntu-training-kubeflow, so its expected-resources check passes.
    components: Mapping[str, str] = field(
        default_factory=lambda: {
            "aws-ebs-csi-driver": "2.59.0",
            "aws-efa": "v0.5.29",
            "cert-manager": "v1.20.2",
            "gpu-operator": "v26.3.3",
            "k8s-ephemeral-storage-metrics": "1.19.2",
            "kai-scheduler": "v0.14.1",
            "kube-prometheus-stack": "84.4.0",
            "kubeflow-trainer": "2.2.0",
            "nfd": "0.19.0",
            "nodewright-customizations": "",
            "nodewright-operator": "v0.17.1",
            "nvidia-dra-driver-gpu": "0.4.1",
            "nvsentinel": "v1.9.0",
            "prometheus-adapter": "5.3.0",
            "prometheus-operator-crds": "28.0.1",
        }
    )
    nccl_busbw_gbps: float = 456.84
    # Simulated container run time per check (seconds of simulated time); default 5 s.
    check_seconds: Mapping[str, float] = field(
        default_factory=lambda: {
            "expected-resources": 45.0,
            "check-nvidia-smi": 24.0,
            "dra-support": 21.0,
            "nccl-all-reduce-bw": 420.0,
            "gang-scheduling": 35.0,
            "robust-controller": 30.0,
        }
    )
    # Wall seconds per simulated second: 0.001 makes a 420 s NCCL run take 0.42 s, a 2 m
    # deadline 0.12 s. Containers always take at least ``min_container_wall_s``.
    time_scale: float = 0.001
    min_container_wall_s: float = 0.02
    # Container failure modes, by check name.
    hang_checks: tuple[str, ...] = ()  # run past activeDeadlineSeconds
    oom_checks: tuple[str, ...] = ()  # terminated: OOMKilled, exit 137
    unpullable_images: tuple[str, ...] = ()  # substrings of images that never pull
    keep_pod_on_deadline: bool = False  # True: pod still listed (no deletionTimestamp)
    # Disruptions half-way through a check: the kubelet evicts the pod under node pressure
    # (pod Failed/Evicted, container 137 ContainerStatusUnknown), or the node is lost and
    # the pod garbage collector force-deletes it (no pod remains); either way the Job
    # (backoffLimit 0) ends Failed/BackoffLimitExceeded.
    evicted_checks: tuple[str, ...] = ()
    node_lost_checks: tuple[str, ...] = ()
    # The snapshot agent: exits 1 with this error (Job Failed, no snapshot), or never finishes.
    # A registry that needs credentials: images under ``private_registry/`` pull only for a pod
    # whose imagePullSecrets name ``registry_secret`` and that Secret exists in its namespace
    # (seeded in ``secret_namespace``, as a maintainer creates it before running AICR).
    private_registry: str = ""
    registry_secret: str = ""
    secret_namespace: str = "aicr-validation"
    agent_failure: str | None = None
    agent_hangs: bool = False
    # What the agent writes as snapshot.yaml instead of the scenario's snapshot (a hostile
    # cluster: YAML bombs, NUL, megabytes).
    snapshot_text: str | None = None
    huge_logs: HugeLogs | None = None
    api_faults: ApiFaults | None = None
    watch_faults: WatchFaults | None = None
    watch_history: int = 10_000  # events kept by the watch cache (older RV ⇒ 410)
    unreachable: bool = False  # the kubeconfig points to a closed port
    token: str = "sim-token-0123456789abcdef"

    def gpu_nodes(self) -> tuple[Node, ...]:
        """Nodes that advertise allocatable ``nvidia.com/gpu`` (the operator's device plugin)."""
        return self.driver_gpu_nodes() if self.device_plugin else ()

    def driver_gpu_nodes(self) -> tuple[Node, ...]:
        """GPU nodes whose driver the running GPU operator loaded, however GPUs are advertised
        (DCGM and the DRA driver's ResourceSlices live there)."""
        if not (self.gpu_operator_version and self.gpu_operator_running):
            return ()
        return tuple(node for node in self.nodes if node.gpus > 0)

    def sim_seconds(self, check: str) -> float:
        return self.check_seconds.get(check, 5.0)


_GPU_NODES = (
    Node("ip-10-0-12-34.ec2.internal", zone="us-east-1a"),
    Node("ip-10-0-56-78.ec2.internal", zone="us-east-1b"),
)
_SYSTEM_NODE = Node(
    "ip-10-0-1-10.ec2.internal", instance_type="m7i.2xlarge", gpus=0, gpu_product=""
)

HEALTHY = Scenario(
    name="healthy-h100-eks",
    description="EKS 1.33, two p5.48xlarge (8xH100) nodes + one system node, Ubuntu 24.04, "
    "GPU operator v26.3.3, DRA driver, DCGM exporter; every declared check passes",
    nodes=(*_GPU_NODES, _SYSTEM_NODE),
)


# GKE GPU node pools: the accelerator/node-pool labels GKE sets, and the taint it puts on every
# GPU pool (nvidia.com/gpu=present:NoSchedule) so only pods that tolerate it land there.
GKE_GPU_TAINT: Mapping[str, str] = MappingProxyType(
    {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
)
_GKE_GPU_NODES = tuple(
    Node(
        name,
        instance_type="a3-highgpu-8g",
        zone=zone,
        extra_labels={
            "cloud.google.com/gke-accelerator": "nvidia-h100-80gb",
            "cloud.google.com/gke-nodepool": "gpu-pool",
        },
        taints=(GKE_GPU_TAINT,),
    )
    for name, zone in (
        ("gke-aicr-gpu-pool-5d1c3a2b-k7xq", "us-central1-a"),
        ("gke-aicr-gpu-pool-5d1c3a2b-p2mv", "us-central1-b"),
    )
)
_GKE_SYSTEM_NODE = Node(
    "gke-aicr-default-pool-8e4f0b1c-z9rt",
    instance_type="e2-standard-8",
    gpus=0,
    gpu_product="",
    zone="us-central1-a",
    extra_labels={"cloud.google.com/gke-nodepool": "default-pool"},
)
PRIVATE_REGISTRY = "registry.aicr-sim.invalid/nvidia"  # .invalid: a name that never resolves


def _without(components: Mapping[str, str], *names: str) -> dict[str, str]:
    return {key: value for key, value in components.items() if key not in names}


SCENARIOS: Mapping[str, Scenario] = MappingProxyType(
    {
        scenario.name: scenario
        for scenario in (
            HEALTHY,
            replace(
                HEALTHY,
                name="gpu-operator-missing",
                description="No GPU operator: no gpu-operator pods, no allocatable GPUs, no DCGM",
                gpu_operator_version=None,
                dcgm_exporter=False,
                components=_without(HEALTHY.components, "gpu-operator"),
            ),
            replace(
                HEALTHY,
                name="gpu-operator-too-old",
                description="GPU operator v23.9.2, below the recipe's >= v24.6.0",
                gpu_operator_version="v23.9.2",
                components={**HEALTHY.components, "gpu-operator": "v23.9.2"},
            ),
            replace(
                HEALTHY,
                name="no-gpu-nodes",
                description="Only CPU nodes: GPU operator installed, nothing to validate on",
                nodes=(
                    _SYSTEM_NODE,
                    replace(_SYSTEM_NODE, name="ip-10-0-2-20.ec2.internal"),
                ),
            ),
            replace(
                HEALTHY,
                name="dra-absent",
                description="The NVIDIA DRA driver is not installed and resource.k8s.io not served",
                dra_driver_installed=False,
                resource_api_versions=(),
                components=_without(HEALTHY.components, "nvidia-dra-driver-gpu"),
            ),
            replace(
                HEALTHY,
                name="dra-mode-h100-eks",
                description="Whole GPUs through DRA only (AICR's experimental opt-in): the DRA "
                "driver publishes gpu.nvidia.com ResourceSlices, the device plugin is off (no "
                "allocatable nvidia.com/gpu)",
                device_plugin=False,
                dra_full_gpu=True,
            ),
            replace(
                HEALTHY,
                name="dual-advertised-h100-eks",
                description="Both the device plugin and full-GPU DRA advertise the same GPUs "
                "(the over-admission risk AICR warns about)",
                dra_full_gpu=True,
            ),
            replace(
                HEALTHY,
                name="readiness-old-kernel",
                description="Kernel 5.15 on Ubuntu 24.04 nodes: readiness fails (>= 6.8)",
                kernel="5.15.0-1051-aws",
            ),
            replace(
                HEALTHY,
                name="readiness-old-kubernetes",
                description="EKS 1.30: readiness fails (K8s.server.version >= 1.32.4)",
                kubernetes_version="v1.30.14-eks-931bdca",
            ),
            replace(
                HEALTHY,
                name="job-deadline-exceeded",
                description="expected-resources never finishes: the Job controller kills it at "
                "activeDeadlineSeconds (DeadlineExceeded) and deletes its pod",
                hang_checks=("expected-resources",),
            ),
            replace(
                HEALTHY,
                name="image-never-pulled",
                description="The validator images cannot be pulled (ImagePullBackOff) until "
                "every Job reaches its deadline",
                unpullable_images=("aicr-validators/",),
            ),
            replace(
                HEALTHY,
                name="oom-killed",
                description="expected-resources is OOMKilled (exit 137)",
                oom_checks=("expected-resources",),
            ),
            replace(
                HEALTHY,
                name="pod-evicted",
                description="The kubelet evicts expected-resources' pod under memory pressure "
                "(pod Failed/Evicted, exit 137)",
                evicted_checks=("expected-resources",),
            ),
            replace(
                HEALTHY,
                name="node-lost",
                description="The node running expected-resources is lost: its pod is "
                "force-deleted and the Job fails",
                node_lost_checks=("expected-resources",),
            ),
            replace(
                HEALTHY,
                name="gke-tainted-gpu-pool",
                description="The GPU nodes form a GKE-style pool tainted "
                "nvidia.com/gpu=present:NoSchedule (one untainted system node): only pods that "
                "tolerate the taint (AICR's agent by default) land on them",
                nodes=(*_GKE_GPU_NODES, _GKE_SYSTEM_NODE),
            ),
            replace(
                HEALTHY,
                name="private-registry",
                description=f"Images under {PRIVATE_REGISTRY}/ need the pull secret 'regcred' "
                "(present in aicr-validation); without it: ErrImagePull, then ImagePullBackOff "
                "until the Job's deadline (the pod stays listed)",
                private_registry=PRIVATE_REGISTRY,
                registry_secret="regcred",
                keep_pod_on_deadline=True,
            ),
            replace(
                HEALTHY,
                name="agent-fails",
                description="The snapshot agent exits 1 (cannot write its ConfigMap): no snapshot",
                agent_failure='failed to write snapshot: configmaps "aicr-snapshot" is '
                "forbidden: exceeded quota: aicr-quota, requested: count/configmaps=1",
            ),
            replace(
                HEALTHY,
                name="agent-hangs",
                description="The snapshot agent never finishes (a collector blocks): the "
                "snapshot wait runs out of its --timeout budget",
                agent_hangs=True,
            ),
            replace(
                HEALTHY,
                name="api-500s",
                description="Every API request answers 500 InternalError",
                api_faults=ApiFaults(status=500, probability=1.0),
            ),
            replace(
                HEALTHY,
                name="api-429",
                description="The first 6 API requests, then 20 % of them, answer 429 with "
                "Retry-After: 1",
                api_faults=ApiFaults(status=429, first_n=6, probability=0.2),
            ),
            replace(
                HEALTHY,
                name="unreachable",
                description="The kubeconfig points to a closed port on 127.0.0.1",
                unreachable=True,
            ),
            replace(
                HEALTHY,
                name="huge-logs",
                description="operator-health writes 3 MB of log: invalid UTF-8, over-long lines, "
                "forged ##AICR-EXTRA## lines, HTML/script",
                huge_logs=HugeLogs(),
            ),
            replace(
                HEALTHY,
                name="runtime-docker-pullable",
                description="Nodes run cri-dockerd: imageID is docker-pullable://<repo>@sha256:…",
                container_runtime="docker://25.0.5",
                image_id_form="docker-pullable",
            ),
            replace(
                HEALTHY,
                name="runtime-config-id",
                description="Images were loaded onto the nodes, not pulled: imageID is the bare "
                "image config id sha256:…, no repository digest is reported",
                image_id_form="config-id",
            ),
            replace(
                HEALTHY,
                name="watch-drops",
                description="Watches close after one event and every third watch answers 410 "
                "Gone; the watch cache keeps only 20 events",
                watch_faults=WatchFaults(max_events=1, gone_every=3),
                watch_history=20,
            ),
        )
    }
)
