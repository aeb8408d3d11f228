"""What an operator configures for the kubernetes backend; every field has a working default.

The Dagster resource (`KubernetesBackendResource`) and `arena evaluate --backend kubernetes`
both build a `KubernetesSettings`; environment variables `ARENA_K8S_*` override the defaults
(read here and nowhere else, as the project's resources do).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields

from speculator_arena import settings
from speculator_arena.protocol.model import TaskProtocol

# The Kubernetes version the manifests are validated against (kubernetes-validate) and whose
# Pod Security Standards the namespace enforces.
KUBERNETES_VERSION = "1.36"

# Labels of NVIDIA's GPU feature discovery (part of the GPU operator) on GPU nodes.
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
HOSTNAME_LABEL = "kubernetes.io/hostname"  # the kubelet's label of its node: a device pins its pod there
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_RESOURCE = "nvidia.com/gpu"


@dataclass
class KubernetesSettings:
    namespace: str = "arena-evaluations"
    image: str = ""  # default: runner_image(protocol's engine image)
    artifacts_claim: str = "arena-artifacts"  # ReadOnlyMany: pools/, targets, speculators, engines
    results_claim: str = "arena-results"  # ReadWriteMany: one sub-directory per evaluation
    artifacts_root: str = "/mnt/arena-artifacts"  # where this (launcher) machine mounts the artifacts volume
    results_root: str = "/mnt/arena-results"  # where this machine mounts the results volume
    runner_uid: int = 1000  # the image's unprivileged user (Dockerfile: arena)
    engine_uid: int = 1001  # the engine container's uid: none of the runner's files is its
    gpu_quota: int = 8  # GPUs the namespace may request at once (ResourceQuota)
    unschedulable_timeout_s: float = 900.0  # a pod no node can take is void after this long
    poll_interval_s: float = 10.0
    # a read of the runner's log stream that waits this long for a byte gives up and reconnects
    # (dagster-k8s' own timeout is an hour): a stream the API server keeps open after the pod
    # ended (evicted, past its deadline, its runner killed) never held the launcher longer
    log_read_timeout_s: float = 60.0
    memory_limit: str = ""  # e.g. "200Gi"; empty: no limit (the node's memory)
    cpu_request: str = ""  # e.g. "8"
    kubeconfig: str = ""  # empty: in-cluster config, else KUBECONFIG / ~/.kube/config
    kube_context: str = ""
    artifacts_size: str = "2Ti"  # the exported PVCs' requests (the launcher never creates volumes)
    results_size: str = "500Gi"
    storage_class: str = ""  # empty: the cluster's default class
    gpu_products: dict[str, str] = field(default_factory=dict)  # task id -> nvidia.com/gpu.product

    @classmethod
    def from_env(cls, **overrides) -> KubernetesSettings:
        """Defaults, then `ARENA_K8S_<FIELD>` variables, then explicit overrides."""
        values = {}
        given = settings.prefixed("ARENA_K8S_")
        for f in fields(cls):
            raw = given.get(f.name)
            if raw is None or f.name == "gpu_products":
                continue
            values[f.name] = type(getattr(cls(), f.name))(raw)
        values.update({k: v for k, v in overrides.items() if v not in (None, "")})
        return cls(**values)


def runner_image(task: TaskProtocol) -> str:
    """The runner image's default name: the protocol's pinned engine image plus the arena."""
    img = task.engine_environment.image
    return f"speculator-arena-runner:{img['name']}-{img['version']}"


def gpu_request(task: TaskProtocol, settings: KubernetesSettings) -> tuple[int, dict[str, str]]:
    """(GPUs, node selector) for the task's `gpu` ("1 x B200"; anything else: one GPU of any kind).

    The product label follows GPU feature discovery's naming (`NVIDIA-B200`); an operator whose
    nodes say otherwise sets `gpu_products`.
    """
    m = re.fullmatch(r"\s*(\d+)\s*x\s*([A-Za-z0-9][A-Za-z0-9 ._-]*?)\s*", task.task.gpu)
    count = int(m.group(1)) if m else 1
    selector = {GPU_PRESENT_LABEL: "true"}
    product = settings.gpu_products.get(task.task_id) or (f"NVIDIA-{m.group(2).replace(' ', '-')}" if m else "")
    if product:
        selector[GPU_PRODUCT_LABEL] = product
    return count, selector
