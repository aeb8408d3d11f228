"""Every object the kubernetes backend builds passes the pinned Kubernetes version's schemas
(kubernetes-validate, strict: no unknown fields) and every pod the restricted Pod Security
profile; the pod is the one the launcher submits, its engine container mounts neither pool nor
results, and what it asks follows the protocol."""

from __future__ import annotations

import copy
from dataclasses import replace

import kubernetes_validate
import pytest
import yaml

from speculator_arena.backends.kubernetes import manifests
from speculator_arena.backends.kubernetes.commands import example_spec
from speculator_arena.backends.kubernetes.deadline import active_deadline_seconds
from speculator_arena.backends.kubernetes.launcher import with_env
from speculator_arena.backends.kubernetes.podsecurity import restricted_violations
from speculator_arena.backends.kubernetes.settings import KUBERNETES_VERSION, KubernetesSettings
from speculator_arena.cli import main
from speculator_arena.protocol import available_versions, load_protocol
from speculator_arena.protocol.model import WORKLOADS

VERSION = f"{KUBERNETES_VERSION}.0"
TASKS = [(v, t) for v in available_versions() for t in load_protocol(v).tasks]


def validate(obj: dict) -> None:
    kubernetes_validate.validate(obj, VERSION, strict=True)


def _objects(version, task_id, settings=None):
    task = load_protocol(version).task(task_id)
    s = settings or KubernetesSettings()
    return task, manifests.export_objects(task, s, example_spec(task_id, version))


@pytest.mark.parametrize("version, task_id", TASKS)
def test_every_object_passes_the_schemas_and_every_pod_the_restricted_profile(version, task_id):
    task, files = _objects(
        version, task_id, KubernetesSettings(memory_limit="200Gi", cpu_request="8", storage_class="fast-rwx")
    )
    kinds = []
    for objs in files.values():
        for obj in objs:
            d = manifests.to_dict(obj)
            validate(d)
            kinds.append(d["kind"])
            if d["kind"] == "Pod":
                assert restricted_violations(d) == []
    assert sorted(kinds) == sorted(
        [
            "Namespace",
            "ResourceQuota",
            "NetworkPolicy",
            "PersistentVolumeClaim",
            "PersistentVolumeClaim",
            "ServiceAccount",
            "Role",
            "RoleBinding",
            "ClusterRole",
            "ClusterRoleBinding",
            "Pod",
        ]
    )


@pytest.mark.parametrize("version, task_id", TASKS)
def test_the_pod_the_launcher_submits_keeps_every_setting(version, task_id):
    """The launcher adds the Pipes variables to the runner container (launcher.with_env, what
    ArenaPipesK8sClient.run_pod creates); the result must still validate and meet the profile."""
    task, files = _objects(version, task_id)
    ours = manifests.to_dict(files["evaluation-pod.yaml"][0])
    submitted = with_env(ours, "runner", {"DAGSTER_PIPES_CONTEXT": "e30=", "DAGSTER_PIPES_MESSAGES": "e30="})
    validate(submitted)
    assert restricted_violations(submitted) == []
    spec = submitted["spec"]
    (runner,), (engine,) = spec["containers"], spec["initContainers"]
    assert runner["securityContext"] == ours["spec"]["containers"][0]["securityContext"]
    assert engine["resources"]["requests"]["nvidia.com/gpu"] == engine["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert "resources" not in runner  # the GPU is the engine container's
    assert spec["activeDeadlineSeconds"] == active_deadline_seconds(task)
    assert spec["automountServiceAccountToken"] is False and spec["restartPolicy"] == "Never"
    assert {"DAGSTER_PIPES_CONTEXT", "ARENA_HOME", "ARENA_ENGINE_SIDECAR"} <= {e["name"] for e in runner["env"]}
    assert not {"DAGSTER_PIPES_CONTEXT", "ARENA_HOME"} & {e["name"] for e in engine["env"]}
    assert runner["command"][:3] == ["python", "-m", "speculator_arena.backends.kubernetes.in_pod"]
    assert engine["command"][:3] == ["python", "-m", "speculator_arena.backends.kubernetes.engine_sidecar"]
    mounts = {m["name"]: m for m in runner["volumeMounts"]}
    assert mounts["artifacts"]["readOnly"] is True and mounts["results"]["subPath"] == f"{task_id}-example"


def _sealed_spec(task_id: str):
    """An evaluation of a sealed engine with a speculator, every input on the artifacts volume."""

    return replace(
        example_spec(task_id, None),
        engine="/arena/artifacts/sealed/engines/abc/engine.tar.gz",
        speculator="/arena/artifacts/sealed/speculators/def",
    )


@pytest.mark.parametrize("version, task_id", TASKS)
def test_the_engine_container_holds_the_gpu_and_mounts_no_pool_and_no_results(version, task_id):
    task = load_protocol(version).task(task_id)
    s = KubernetesSettings(memory_limit="200Gi")
    spec = _sealed_spec(task_id)
    pod = manifests.to_dict(manifests.evaluation_pod(spec, task, s))
    validate(pod)
    assert restricted_violations(pod) == []
    ps = pod["spec"]
    (runner,), (engine,) = ps["containers"], ps["initContainers"]
    assert engine["restartPolicy"] == "Always"  # a native sidecar: stopped by the kubelet after the runner
    assert ps["shareProcessNamespace"] is True and ps["automountServiceAccountToken"] is False
    # Two users: the engine's is not the runner's, and neither is root.
    e_sc, r_sc = engine["securityContext"], runner["securityContext"]
    assert e_sc["runAsUser"] == s.engine_uid != r_sc["runAsUser"] == s.runner_uid
    assert e_sc["runAsGroup"] == s.engine_uid and e_sc["runAsNonRoot"] is True
    assert e_sc["readOnlyRootFilesystem"] is True and e_sc["capabilities"] == {"drop": ["ALL"]}
    # The engine's mounts: each of its inputs, read-only, as a sub-path of the artifacts volume;
    # its own emptyDirs; nothing of the runner's, no results, no pool.
    volumes = {v["name"]: v for v in ps["volumes"]}
    inputs = [m for m in engine["volumeMounts"] if m["name"] == "artifacts"]
    assert not spec.stock_engine.startswith("/")  # the image's repository holds it: nothing to mount
    assert sorted(m["mountPath"] for m in inputs) == sorted([spec.target, spec.speculator, spec.engine])
    for m in inputs:
        assert m["readOnly"] is True and "/arena/artifacts/" + m["subPath"] == m["mountPath"]
        assert not m["subPath"].startswith("pools")
    others = {m["name"] for m in engine["volumeMounts"]} - {"artifacts"}
    assert others == {"engine-scratch", "engine-tmp", "engine-shm"}
    assert all("emptyDir" in volumes[n] for n in others)
    assert not others & {m["name"] for m in runner["volumeMounts"]}  # no volume shared on disk
    assert "results" not in {m["name"] for m in engine["volumeMounts"]}
    assert engine["resources"]["limits"] == {"nvidia.com/gpu": "1", "memory": "200Gi"}
    assert {e["name"]: e["value"] for e in runner["env"]}["ARENA_ENGINE_SIDECAR"].startswith("127.0.0.1:")


def test_gpu_and_node_selector_follow_the_task():
    _, files = _objects(1, "qwen3-8b")
    pod = manifests.to_dict(files["evaluation-pod.yaml"][0])
    assert pod["spec"]["nodeSelector"] == {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-B200"}
    _, files = _objects(1, "qwen3-8b", KubernetesSettings(gpu_products={"qwen3-8b": "NVIDIA-B200-SXM6"}))
    assert (
        manifests.to_dict(files["evaluation-pod.yaml"][0])["spec"]["nodeSelector"]["nvidia.com/gpu.product"]
        == "NVIDIA-B200-SXM6"
    )
    _, files = _objects(1, "local-smollm2")  # "none (CPU) or any CUDA device": any GPU node
    assert manifests.to_dict(files["evaluation-pod.yaml"][0])["spec"]["nodeSelector"] == {
        "nvidia.com/gpu.present": "true"
    }


def test_a_device_pins_the_pod_to_its_node():
    """Issue 32: the run's device (`ARENA_DEVICE`, one GPU node each) is the node the pod may run
    on, beside the task's GPU labels; without one, any node with the task's GPU."""
    task = load_protocol(1).task("qwen3-8b")
    spec = example_spec("qwen3-8b", 1)
    pinned = manifests.to_dict(manifests.evaluation_pod(spec, task, KubernetesSettings(), node="gpu-b"))
    assert pinned["spec"]["nodeSelector"] == {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": "NVIDIA-B200",
        "kubernetes.io/hostname": "gpu-b",
    }
    validate(pinned)
    free = manifests.to_dict(manifests.evaluation_pod(spec, task, KubernetesSettings()))
    assert "kubernetes.io/hostname" not in free["spec"]["nodeSelector"]


def test_namespace_quota_and_policy():
    _, files = _objects(1, "qwen3-8b", KubernetesSettings(gpu_quota=3))
    ns = manifests.to_dict(files["namespace.yaml"][0])
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce-version"] == f"v{KUBERNETES_VERSION}"
    assert manifests.to_dict(files["quota.yaml"][0])["spec"]["hard"] == {"requests.nvidia.com/gpu": "3"}
    pol = manifests.to_dict(files["network-policy.yaml"][0])["spec"]
    assert pol["podSelector"] == {} and set(pol["policyTypes"]) == {"Ingress", "Egress"}
    assert pol["egress"] == [] and pol["ingress"] == []


def test_the_deadline_is_derived_from_the_protocol_limits():
    task = load_protocol(1).task("qwen3-8b")
    base = active_deadline_seconds(task)
    ss, grace = task.start_stop, task.grace_seconds
    timed = sum(
        (task.warmup_waves + task.passes_per_workload) * (task.workloads[w].pass_seconds + grace) for w in WORKLOADS
    )
    assert base > 2 * timed + 4 * ss.health_timeout_seconds
    longer = task.model_copy(update={"grace_seconds": grace + 10})
    probes = (
        2 * (task.gates.greedy_agreement.prompts + task.gates.target_fidelity.texts)
        + 2 * task.gates.sampled_likelihood.replies
    )
    passes = 2 * sum(task.warmup_waves + task.passes_per_workload for _ in WORKLOADS)
    assert active_deadline_seconds(longer) - base == 10 * (passes + probes)
    slower = task.model_copy(
        update={"start_stop": ss.model_copy(update={"health_timeout_seconds": ss.health_timeout_seconds + 1})}
    )
    assert active_deadline_seconds(slower) - base == 5  # preparation + four engine starts


def test_paths_the_pod_cannot_see_are_refused(tmp_path):
    s = KubernetesSettings(artifacts_root=str(tmp_path / "artifacts"))
    (tmp_path / "artifacts" / "checkpoints").mkdir(parents=True)
    assert manifests.pod_path(str(tmp_path / "artifacts" / "checkpoints"), s) == "/arena/artifacts/checkpoints"
    assert manifests.pod_path("engines/vllm-ngram", s) == "engines/vllm-ngram"
    with pytest.raises(ValueError, match="not under the artifacts volume"):
        manifests.pod_path(str(tmp_path / "elsewhere"), s)


def test_the_cli_writes_what_the_code_builds(tmp_path):
    assert main(["k8s", "manifests", "--task", "qwen3-8b", "--out", str(tmp_path), "--namespace", "arena-x"]) == 0
    kust = yaml.safe_load((tmp_path / "kustomization.yaml").read_text())
    assert "evaluation-pod.yaml" not in kust["resources"]
    for name in kust["resources"] + ["evaluation-pod.yaml"]:
        for doc in yaml.safe_load_all((tmp_path / name).read_text()):
            validate(doc)
            assert doc["metadata"].get("namespace", "arena-x") == "arena-x"
    _, files = _objects(None, "qwen3-8b", KubernetesSettings(namespace="arena-x"))
    pod = yaml.safe_load((tmp_path / "evaluation-pod.yaml").read_text())
    assert pod == manifests.to_dict(files["evaluation-pod.yaml"][0])


# ---- the checker itself rejects pods that break the profile ------------------------------------
def _good_pod() -> dict:
    _, files = _objects(1, "qwen3-8b")
    return manifests.to_dict(files["evaluation-pod.yaml"][0])


def _set(path: str, value):
    def change(pod):
        obj = pod
        keys = path.split(".")
        for k in keys[:-1]:
            obj = obj[int(k)] if k.isdigit() else obj.setdefault(k, {})
        if value is None:
            obj.pop(keys[-1], None)
        else:
            obj[keys[-1]] = value

    return change


C = "spec.containers.0.securityContext"
BAD = [
    ("privileged", _set(f"{C}.privileged", True), "privileged"),
    ("privilege escalation allowed", _set(f"{C}.allowPrivilegeEscalation", True), "allowPrivilegeEscalation"),
    ("privilege escalation unset", _set(f"{C}.allowPrivilegeEscalation", None), "allowPrivilegeEscalation"),
    ("capabilities not dropped", _set(f"{C}.capabilities", {"drop": ["NET_RAW"]}), "drop must include ALL"),
    ("capability added", _set(f"{C}.capabilities", {"drop": ["ALL"], "add": ["SYS_ADMIN"]}), "SYS_ADMIN"),
    (
        "root allowed",
        lambda p: (_set(f"{C}.runAsNonRoot", None)(p), _set("spec.securityContext.runAsNonRoot", None)(p)),
        "runAsNonRoot",
    ),
    ("uid 0", _set(f"{C}.runAsUser", 0), "runAsUser"),
    ("seccomp unconfined", _set(f"{C}.seccompProfile", {"type": "Unconfined"}), "seccompProfile"),
    (
        "no seccomp anywhere",
        lambda p: (_set(f"{C}.seccompProfile", None)(p), _set("spec.securityContext.seccompProfile", None)(p)),
        "seccompProfile",
    ),
    ("host network", _set("spec.hostNetwork", True), "hostNetwork"),
    ("hostPath volume", lambda p: p["spec"]["volumes"].append({"name": "h", "hostPath": {"path": "/"}}), "hostPath"),
    ("host port", _set("spec.containers.0.ports", [{"containerPort": 8000, "hostPort": 8000}]), "hostPort"),
    ("unsafe sysctl", _set("spec.securityContext.sysctls", [{"name": "kernel.msgmax", "value": "1"}]), "sysctl"),
    ("unmasked /proc", _set(f"{C}.procMount", "Unmasked"), "procMount"),
    ("engine container privileged", _set("spec.initContainers.0.securityContext.privileged", True), "privileged"),
    ("engine container as root", _set("spec.initContainers.0.securityContext.runAsUser", 0), "runAsUser"),
]


@pytest.mark.parametrize("case, change, words", BAD, ids=[b[0] for b in BAD])
def test_the_checker_rejects_a_pod_that_breaks_the_profile(case, change, words):
    pod = copy.deepcopy(_good_pod())
    change(pod)
    problems = restricted_violations(pod)
    assert problems and any(words in p for p in problems), (case, problems)


def test_schema_validation_rejects_a_malformed_pod():
    pod = _good_pod()
    pod["spec"]["initContainers"][0]["resources"]["limits"] = ["nvidia.com/gpu"]
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(pod)
    pod = _good_pod()
    pod["spec"]["containers"][0]["gpu"] = 1  # strict: an unknown field
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(pod)


def test_a_fit_pod_has_the_deadline_of_its_passes():
    """The calibration's m/c fit (a spec with a fit plan) runs one stock engine and one short pass
    per grid point: its pod's deadline is that, not an evaluation's, and grows with the grid."""
    task = load_protocol(1).task("qwen3-8b")
    ss, idle, grace = task.start_stop, task.device_idle, task.grace_seconds
    spec = replace(_sealed_spec("qwen3-8b"), fit={"workload": "busy", "seconds": 30.0, "points": [[1, 1.0], [2, 1.0]]})
    pod = manifests.to_dict(manifests.evaluation_pod(spec, task, KubernetesSettings(memory_limit="200Gi")))
    cycle = ss.health_timeout_seconds + ss.sigterm_grace_seconds + idle.within_seconds
    assert pod["spec"]["activeDeadlineSeconds"] == ss.health_timeout_seconds + cycle + 2 * (30 + grace)
    more = dict(spec.fit, points=[[m, 1.0] for m in range(1, 21)])
    assert active_deadline_seconds(task, more) - active_deadline_seconds(task, spec.fit) == 18 * (30 + grace)
