"""Every Kubernetes object of the backend, built with the `kubernetes` client's typed models.

The launcher creates these through the API; `arena k8s manifests --task T` writes the same
objects as YAML (with a kustomization.yaml) for an operator to read and `kubectl apply -k`.

The namespace enforces Pod Security `restricted`, a ResourceQuota caps its GPUs, and a
NetworkPolicy selecting every pod denies all ingress and egress (the engine talks only to the
runner, on the pod's loopback, which no NetworkPolicy touches). The evaluation pod asks one
`nvidia.com/gpu` (request = limit) on a node of the task's GPU, runs as the image's
unprivileged user with no privilege escalation, every capability dropped, seccomp
RuntimeDefault, a read-only root filesystem (writable: the results sub-directory, scratch,
/tmp and /dev/shm as emptyDirs), no service-account token, and an activeDeadlineSeconds from
the protocol (deadline.py). The sealed target, speculator, engines and pools come from the
artifacts volume, mounted read-only.
"""

from __future__ import annotations

from pathlib import Path

from kubernetes import client as k8s

from speculator_arena.backends.kubernetes.deadline import active_deadline_seconds
from speculator_arena.backends.kubernetes.in_pod import POD_ARTIFACTS, POD_RESULTS, POD_SCRATCH, pod_command
from speculator_arena.backends.kubernetes.settings import (
    GPU_RESOURCE,
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
LAUNCHER_ACCOUNT = "arena-launcher"


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
            k8s.V1PolicyRule(api_groups=[""], resources=["pods"], verbs=["create", "get", "list", "watch", "delete"]),
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
    """The same evaluation spec with every path as the pod sees it."""
    from dataclasses import replace

    return replace(
        spec,
        engine=pod_path(spec.engine, s),
        stock_engine=pod_path(spec.stock_engine, s),
        target=pod_path(spec.target, s),
        speculator=pod_path(spec.speculator, s),
    )


def evaluation_pod(
    spec: EvaluationSpec, task: TaskProtocol, s: KubernetesSettings, name: str | None = None
) -> k8s.V1Pod:
    """The pod of one evaluation; `spec` holds pod paths (pod_spec_of)."""
    gpus, selector = gpu_request(task, s)
    limits = {GPU_RESOURCE: str(gpus)}
    requests = dict(limits)
    if s.memory_limit:
        limits["memory"] = requests["memory"] = s.memory_limit
    if s.cpu_request:
        requests["cpu"] = s.cpu_request
    runtime_default = k8s.V1SeccompProfile(type="RuntimeDefault")
    env = {
        "ARENA_HOME": POD_RESULTS,
        "HOME": POD_SCRATCH,
        "XDG_CACHE_HOME": f"{POD_SCRATCH}/cache",
        "TMPDIR": "/tmp",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PYTHONUNBUFFERED": "1",
        # A restricted pod cannot switch users: the runner says so in the provenance instead.
        "ARENA_NO_PRIVILEGE_DROP": "1",
    }
    container = k8s.V1Container(
        name=RUNNER_CONTAINER,
        image=s.image or runner_image(task),
        image_pull_policy="IfNotPresent",
        command=pod_command(spec),
        env=[k8s.V1EnvVar(name=k, value=v) for k, v in env.items()],
        resources=k8s.V1ResourceRequirements(requests=requests, limits=limits),
        security_context=k8s.V1SecurityContext(
            allow_privilege_escalation=False,
            privileged=False,
            read_only_root_filesystem=True,
            run_as_non_root=True,
            run_as_user=s.runner_uid,
            run_as_group=s.runner_uid,
            capabilities=k8s.V1Capabilities(drop=["ALL"]),
            seccomp_profile=runtime_default,
        ),
        volume_mounts=[
            k8s.V1VolumeMount(name="artifacts", mount_path=POD_ARTIFACTS, read_only=True),
            k8s.V1VolumeMount(name="results", mount_path=POD_RESULTS, sub_path=spec.evaluation_id),
            k8s.V1VolumeMount(name="scratch", mount_path=POD_SCRATCH),
            k8s.V1VolumeMount(name="tmp", mount_path="/tmp"),
            k8s.V1VolumeMount(name="shm", mount_path="/dev/shm"),
        ],
    )
    labels = {
        **PART_OF,
        "app.kubernetes.io/name": "arena-evaluation",
        EVALUATION_LABEL: label_value(spec.evaluation_id),
        TASK_LABEL: label_value(spec.task_id),
    }
    return k8s.V1Pod(
        api_version="v1",
        kind="Pod",
        metadata=k8s.V1ObjectMeta(name=name or pod_name(spec.evaluation_id), namespace=s.namespace, labels=labels),
        spec=k8s.V1PodSpec(
            restart_policy="Never",
            active_deadline_seconds=active_deadline_seconds(task),
            automount_service_account_token=False,
            enable_service_links=False,
            node_selector=selector,
            tolerations=[k8s.V1Toleration(key=GPU_RESOURCE, operator="Exists", effect="NoSchedule")],
            security_context=k8s.V1PodSecurityContext(
                run_as_non_root=True,
                run_as_user=s.runner_uid,
                run_as_group=s.runner_uid,
                fs_group=s.runner_uid,
                seccomp_profile=runtime_default,
            ),
            termination_grace_period_seconds=int(task.start_stop.sigterm_grace_seconds) + 1,
            containers=[container],
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
                k8s.V1Volume(name="scratch", empty_dir=k8s.V1EmptyDirVolumeSource()),
                k8s.V1Volume(name="tmp", empty_dir=k8s.V1EmptyDirVolumeSource()),
                k8s.V1Volume(name="shm", empty_dir=k8s.V1EmptyDirVolumeSource(medium="Memory")),
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
