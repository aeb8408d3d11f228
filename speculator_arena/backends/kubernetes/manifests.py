"""Every Kubernetes object of the backend, built with the `kubernetes` client's typed models.

The launcher creates these through the API; `arena k8s manifests --task T` writes the same
objects as YAML (with a kustomization.yaml) for an operator to read and `kubectl apply -k`.

The namespace enforces Pod Security `restricted`, a ResourceQuota caps its GPUs, and a
NetworkPolicy selecting every pod denies all ingress and egress (the engine talks only to the
runner, on the pod's loopback, which no NetworkPolicy touches). The evaluation pod has two
containers under two uids (`evaluation_pod`): the runner, and the engine's, which asks one
`nvidia.com/gpu` (request = limit) on a node of the task's GPU. Both run with no privilege
escalation, every capability dropped, seccomp RuntimeDefault, a read-only root filesystem
(writable: emptyDirs of their own; the runner also the results sub-directory), no
service-account token, and the pod an activeDeadlineSeconds from the protocol (deadline.py). The
runner mounts the artifacts volume (pools, sealed inputs, engines) read-only; the engine's
container only the sealed target, speculator and engines, each a read-only sub-path.
"""

from __future__ import annotations

from pathlib import Path

from kubernetes import client as k8s

from speculator_arena.backends.kubernetes.deadline import active_deadline_seconds
from speculator_arena.backends.kubernetes.engine_sidecar import sidecar_command
from speculator_arena.backends.kubernetes.in_pod import (
    POD_ARTIFACTS,
    POD_ENGINE_SCRATCH,
    POD_RESULTS,
    POD_SCRATCH,
    SIDECAR_LISTEN,
    pod_command,
)
from speculator_arena.backends.kubernetes.settings import (
    GPU_RESOURCE,
    HOSTNAME_LABEL,
    KUBERNETES_VERSION,
    KubernetesSettings,
    gpu_request,
    runner_image,
)
from speculator_arena.protocol.model import TaskProtocol
from speculator_arena.runners.spec import EvaluationSpec

APP = "speculator-arena"
PART_OF = {"app.kubernetes.io/part-of": APP}
EVALUATION_LABEL = "speculator-arena/evaluation-id"
TASK_LABEL = "speculator-arena/task"
RUNNER_CONTAINER = "runner"
ENGINE_CONTAINER = "engine"
LAUNCHER_ACCOUNT = "arena-launcher"
# Holds the pod in the API until the launcher has read how it ended: a kubelet deletes an evicted
# pod (grace 0) as soon as its containers are stopped, so without it a launcher that polls
# finds the pod gone (`vanished`) instead of `evicted`, and a resumed launcher finds nothing.
OUTCOME_FINALIZER = "speculator-arena/outcome"


def to_dict(obj) -> dict:
    """An object as the API server's JSON (camelCase, no nulls)."""
    return k8s.ApiClient().sanitize_for_serialization(obj)


def label_value(value: str) -> str:
    """A label value (at most 63 characters of [A-Za-z0-9_.-], alphanumeric at both ends)."""
    out = "".join(c if c.isalnum() or c in "_.-" else "-" for c in value)[:63]
    return out.strip("_.-") or "x"


# ---- the namespace and what lives in it for every evaluation --------------------------------
def namespace(s: KubernetesSettings) -> k8s.V1Namespace:
    pss = {f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "audit", "warn")}
    pss.update(
        {
            f"pod-security.kubernetes.io/{mode}-version": f"v{KUBERNETES_VERSION}"
            for mode in ("enforce", "audit", "warn")
        }
    )
    return k8s.V1Namespace(
        api_version="v1", kind="Namespace", metadata=k8s.V1ObjectMeta(name=s.namespace, labels={**PART_OF, **pss})
    )


def resource_quota(s: KubernetesSettings) -> k8s.V1ResourceQuota:
    return k8s.V1ResourceQuota(
        api_version="v1",
        kind="ResourceQuota",
        metadata=k8s.V1ObjectMeta(name="arena-gpus", namespace=s.namespace, labels=PART_OF),
        spec=k8s.V1ResourceQuotaSpec(hard={f"requests.{GPU_RESOURCE}": str(s.gpu_quota)}),
    )


def network_policy(s: KubernetesSettings) -> k8s.V1NetworkPolicy:
    """Every pod of the namespace: no ingress, no egress (empty rule lists deny all)."""
    return k8s.V1NetworkPolicy(
        api_version="networking.k8s.io/v1",
        kind="NetworkPolicy",
        metadata=k8s.V1ObjectMeta(name="arena-deny-all", namespace=s.namespace, labels=PART_OF),
        spec=k8s.V1NetworkPolicySpec(
            pod_selector=k8s.V1LabelSelector(), policy_types=["Ingress", "Egress"], ingress=[], egress=[]
        ),
    )


def namespace_objects(s: KubernetesSettings) -> list:
    """What the launcher creates (or finds) before the first pod: namespace, quota, policy."""
    return [namespace(s), resource_quota(s), network_policy(s)]


def volume_claims(s: KubernetesSettings) -> list[k8s.V1PersistentVolumeClaim]:
    """The two volumes (exported for the operator; the launcher only checks that they exist)."""

    def claim(name, mode, size):
        return k8s.V1PersistentVolumeClaim(
            api_version="v1",
            kind="PersistentVolumeClaim",
            metadata=k8s.V1ObjectMeta(name=name, namespace=s.namespace, labels=PART_OF),
            spec=k8s.V1PersistentVolumeClaimSpec(
                access_modes=[mode],
                storage_class_name=s.storage_class or None,
                resources=k8s.V1VolumeResourceRequirements(requests={"storage": size}),
            ),
        )

    return [
        claim(s.artifacts_claim, "ReadOnlyMany", s.artifacts_size),
        claim(s.results_claim, "ReadWriteMany", s.results_size),
    ]


def launcher_rbac(s: KubernetesSettings) -> list:
    """The launcher's rights: pods and their logs in the namespace, the namespace objects, and
    (cluster-wide) reading and creating the namespace itself."""
    meta = lambda name: k8s.V1ObjectMeta(name=name, namespace=s.namespace, labels=PART_OF)  # noqa: E731
    role = k8s.V1Role(
        api_version="rbac.authorization.k8s.io/v1",
        kind="Role",
        metadata=meta(LAUNCHER_ACCOUNT),
        rules=[
            k8s.V1PolicyRule(
                api_groups=[""], resources=["pods"], verbs=["create", "get", "list", "watch", "delete", "patch"]
            ),
            k8s.V1PolicyRule(api_groups=[""], resources=["pods/log"], verbs=["get"]),
            k8s.V1PolicyRule(
                api_groups=[""],
                resources=["resourcequotas", "persistentvolumeclaims"],
                verbs=["get", "create", "patch"],
            ),
            k8s.V1PolicyRule(
                api_groups=["networking.k8s.io"], resources=["networkpolicies"], verbs=["get", "create", "patch"]
            ),
        ],
    )
    account = k8s.V1ServiceAccount(api_version="v1", kind="ServiceAccount", metadata=meta(LAUNCHER_ACCOUNT))
    subject = [k8s.RbacV1Subject(kind="ServiceAccount", name=LAUNCHER_ACCOUNT, namespace=s.namespace)]
    binding = k8s.V1RoleBinding(
        api_version="rbac.authorization.k8s.io/v1",
        kind="RoleBinding",
        metadata=meta(LAUNCHER_ACCOUNT),
        role_ref=k8s.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name=LAUNCHER_ACCOUNT),
        subjects=subject,
    )
    cluster_name = f"{LAUNCHER_ACCOUNT}-{s.namespace}"
    cluster_role = k8s.V1ClusterRole(
        api_version="rbac.authorization.k8s.io/v1",
        kind="ClusterRole",
        metadata=k8s.V1ObjectMeta(name=cluster_name, labels=PART_OF),
        rules=[k8s.V1PolicyRule(api_groups=[""], resources=["namespaces"], verbs=["get", "create", "patch"])],
    )
    cluster_binding = k8s.V1ClusterRoleBinding(
        api_version="rbac.authorization.k8s.io/v1",
        kind="ClusterRoleBinding",
        metadata=k8s.V1ObjectMeta(name=cluster_name, labels=PART_OF),
        role_ref=k8s.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=cluster_name),
        subjects=subject,
    )
    return [account, role, binding, cluster_role, cluster_binding]


# ---- the evaluation pod ------------------------------------------------------------------------
def pod_path(path: str | None, s: KubernetesSettings) -> str | None:
    """A launcher path as the pod sees it: under `artifacts_root` -> under the read-only mount;
    relative (an engine of the repository, e.g. engines/vllm-ngram) -> as is, resolved in the
    image's copy of the repository. Anything else cannot reach the pod: a clear error."""
    if path is None:
        return None
    p = Path(path)
    if not p.is_absolute():
        return path
    root = Path(s.artifacts_root)
    try:
        rel = p.resolve().relative_to(root.resolve())
    except ValueError:
        raise ValueError(
            f"{path} is not under the artifacts volume ({s.artifacts_root}); the pod sees only "
            "that volume and the image's repository (relative engine paths)"
        ) from None
    return f"{POD_ARTIFACTS}/{rel.as_posix()}"


def pod_spec_of(spec: EvaluationSpec, s: KubernetesSettings) -> EvaluationSpec:
    """The same evaluation spec with every path as the pod sees it, and its protocol version
    pinned: the pod resolves no "latest" of its own (its image may hold other versions than the
    launcher's, and the pod's deadline is the launcher's version's)."""
    from dataclasses import replace

    from speculator_arena.protocol import load_protocol

    return replace(
        spec,
        protocol_version=spec.protocol_version or load_protocol().version,
        engine=pod_path(spec.engine, s),
        stock_engine=pod_path(spec.stock_engine, s),
        target=pod_path(spec.target, s),
        speculator=pod_path(spec.speculator, s),
    )


def _security(uid: int) -> k8s.V1SecurityContext:
    """A container of the restricted profile under `uid`, with a read-only root filesystem."""
    return k8s.V1SecurityContext(
        allow_privilege_escalation=False,
        privileged=False,
        read_only_root_filesystem=True,
        run_as_non_root=True,
        run_as_user=uid,
        run_as_group=uid,
        capabilities=k8s.V1Capabilities(drop=["ALL"]),
        seccomp_profile=k8s.V1SeccompProfile(type="RuntimeDefault"),
    )


def _env(values: dict[str, str]) -> list[k8s.V1EnvVar]:
    return [k8s.V1EnvVar(name=k, value=v) for k, v in values.items()]


def engine_inputs(spec: EvaluationSpec) -> list[str]:
    """The pod paths the engine's container mounts from the artifacts volume (each alone, as a
    sub-path): the sealed target, the speculator and the engines; never the pools."""
    paths = [spec.target, spec.speculator, spec.engine, spec.stock_engine]
    prefix = POD_ARTIFACTS + "/"
    return sorted({p for p in paths if p and p.startswith(prefix)})


def evaluation_pod(
    spec: EvaluationSpec, task: TaskProtocol, s: KubernetesSettings, name: str | None = None, node: str | None = None
) -> k8s.V1Pod:
    """The pod of one evaluation; `spec` holds pod paths (pod_spec_of).

    Two containers under two uids, sharing the pod's loopback and process namespace and nothing
    on disk: the runner (the Pipes container: the results sub-directory, the artifacts volume
    with the pools) and the engine, a native sidecar (an init container that keeps running and
    that the kubelet stops once the runner ended; the pod's logs and phase are the runner's)
    holding the GPU, with only the engine's inputs mounted (engine_sidecar.py, sidecar_engine.py).
    `node`: the GPU node the pod must run on (its run's device, `ARENA_DEVICE`), so that the
    queue's one evaluation per device is one per node.
    """
    gpus, selector = gpu_request(task, s)
    if node:
        selector = {**selector, HOSTNAME_LABEL: node}
    limits = {GPU_RESOURCE: str(gpus)}
    requests = dict(limits)
    if s.memory_limit:
        limits["memory"] = requests["memory"] = s.memory_limit
    if s.cpu_request:
        requests["cpu"] = s.cpu_request
    image = s.image or runner_image(task)
    offline = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1", "TMPDIR": "/tmp"}
    runner = k8s.V1Container(
        name=RUNNER_CONTAINER,
        image=image,
        image_pull_policy="IfNotPresent",
        command=pod_command(spec),
        env=_env(
            {
                "ARENA_HOME": POD_RESULTS,
                "HOME": POD_SCRATCH,
                "XDG_CACHE_HOME": f"{POD_SCRATCH}/cache",
                **offline,
                "ARENA_ENGINE_SIDECAR": SIDECAR_LISTEN,
                # NVML for the engine's GPU (the device plugin gave it to the engine's container):
                # honoured where the container toolkit accepts the variable (docs/operators/kubernetes.md).
                "NVIDIA_VISIBLE_DEVICES": "all",
            }
        ),
        security_context=_security(s.runner_uid),
        volume_mounts=[
            k8s.V1VolumeMount(name="artifacts", mount_path=POD_ARTIFACTS, read_only=True),
            k8s.V1VolumeMount(name="results", mount_path=POD_RESULTS, sub_path=spec.evaluation_id),
            k8s.V1VolumeMount(name="scratch", mount_path=POD_SCRATCH),
            k8s.V1VolumeMount(name="tmp", mount_path="/tmp"),
            k8s.V1VolumeMount(name="shm", mount_path="/dev/shm"),
        ],
    )
    engine = k8s.V1Container(
        name=ENGINE_CONTAINER,
        image=image,
        image_pull_policy="IfNotPresent",
        restart_policy="Always",  # a native sidecar
        command=sidecar_command(SIDECAR_LISTEN, POD_ENGINE_SCRATCH),
        env=_env({"HOME": f"{POD_ENGINE_SCRATCH}/home", "XDG_CACHE_HOME": f"{POD_ENGINE_SCRATCH}/cache", **offline}),
        resources=k8s.V1ResourceRequirements(requests=requests, limits=limits),
        security_context=_security(s.engine_uid),
        volume_mounts=[
            *(
                k8s.V1VolumeMount(name="artifacts", mount_path=p, sub_path=p[len(POD_ARTIFACTS) + 1 :], read_only=True)
                for p in engine_inputs(spec)
            ),
            k8s.V1VolumeMount(name="engine-scratch", mount_path=POD_ENGINE_SCRATCH),
            k8s.V1VolumeMount(name="engine-tmp", mount_path="/tmp"),
            k8s.V1VolumeMount(name="engine-shm", mount_path="/dev/shm"),
        ],
    )
    labels = {
        **PART_OF,
        "app.kubernetes.io/name": "arena-evaluation",
        EVALUATION_LABEL: label_value(spec.evaluation_id),
        TASK_LABEL: label_value(spec.task_id),
    }
    empty = lambda n, **kw: k8s.V1Volume(name=n, empty_dir=k8s.V1EmptyDirVolumeSource(**kw))  # noqa: E731
    return k8s.V1Pod(
        api_version="v1",
        kind="Pod",
        metadata=k8s.V1ObjectMeta(
            name=name or pod_name(spec.evaluation_id),
            namespace=s.namespace,
            labels=labels,
            finalizers=[OUTCOME_FINALIZER],
        ),
        spec=k8s.V1PodSpec(
            restart_policy="Never",
            active_deadline_seconds=active_deadline_seconds(task, spec.fit),
            automount_service_account_token=False,
            enable_service_links=False,
            # The runner reads the engine's processes (CPU accounting, leftovers after a stop)
            # and checks its supervisor in /proc; other uids' /proc entries show no environment.
            share_process_namespace=True,
            node_selector=selector,
            tolerations=[k8s.V1Toleration(key=GPU_RESOURCE, operator="Exists", effect="NoSchedule")],
            security_context=k8s.V1PodSecurityContext(
                run_as_non_root=True,
                run_as_user=s.runner_uid,
                run_as_group=s.runner_uid,
                fs_group=s.runner_uid,
                seccomp_profile=k8s.V1SeccompProfile(type="RuntimeDefault"),
            ),
            termination_grace_period_seconds=int(task.start_stop.sigterm_grace_seconds) + 1,
            init_containers=[engine],
            containers=[runner],
            volumes=[
                k8s.V1Volume(
                    name="artifacts",
                    persistent_volume_claim=k8s.V1PersistentVolumeClaimVolumeSource(
                        claim_name=s.artifacts_claim, read_only=True
                    ),
                ),
                k8s.V1Volume(
                    name="results",
                    persistent_volume_claim=k8s.V1PersistentVolumeClaimVolumeSource(claim_name=s.results_claim),
                ),
                empty("scratch"),
                empty("tmp"),
                empty("shm", medium="Memory"),
                empty("engine-scratch"),
                empty("engine-tmp"),
                empty("engine-shm", medium="Memory"),
            ],
        ),
    )


def pod_name(evaluation_id: str) -> str:
    """A DNS-1123 name for the evaluation's pod (launched without Dagster)."""
    return ("arena-" + label_value(evaluation_id).lower().replace("_", "-").replace(".", "-"))[:63].rstrip("-")


# ---- the operator's export -----------------------------------------------------------------------
def export_objects(task: TaskProtocol, s: KubernetesSettings, spec: EvaluationSpec) -> dict[str, list]:
    """File name -> objects, in the order an operator applies them."""
    return {
        "namespace.yaml": [namespace(s)],
        "quota.yaml": [resource_quota(s)],
        "network-policy.yaml": [network_policy(s)],
        "volumes.yaml": volume_claims(s),
        "launcher-rbac.yaml": launcher_rbac(s),
        "evaluation-pod.yaml": [evaluation_pod(spec, task, s)],
    }


def export_yaml(task: TaskProtocol, s: KubernetesSettings, spec: EvaluationSpec) -> dict[str, str]:
    """File name -> YAML text, plus a kustomization.yaml listing the files."""
    import yaml

    header = (
        f"# Generated by `arena k8s manifests --task {task.task_id}` (speculator_arena/backends/"
        f"kubernetes/manifests.py), protocol v{task.protocol_version}. Do not edit: regenerate.\n"
    )
    files = {
        name: header + yaml.safe_dump_all([to_dict(o) for o in objs], sort_keys=False)
        for name, objs in export_objects(task, s, spec).items()
    }
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [n for n in files if n != "evaluation-pod.yaml"],
    }
    files["kustomization.yaml"] = header + yaml.safe_dump(kustomization, sort_keys=False)
    return files
