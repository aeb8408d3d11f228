"""The real control plane for the kubernetes backend's cluster tests: `../shared/tools/kube/up`
once per session (etcd, kube-apiserver, kube-controller-manager, kube-scheduler of Kubernetes
1.36), a GPU node played by the kubelet stand-in (kubelet_standin.py), the arena's namespace
objects and its two volumes (PersistentVolumes bound to local directories), `down` at the end.

Skips, with the reason, where it cannot run: not root (the stand-in's containers need bind
mounts and setuid), no etcd (`apt-get install -y etcd-server`; scripts/setup.sh does it as
root), no kube tools, or an interpreter and repository that an unprivileged uid cannot read
(the pod's containers run under uids of their own). `ARENA_KUBE_TOOLS` names the tools' folder.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KUBE_TOOLS = Path(os.environ.get("ARENA_KUBE_TOOLS", REPO.parent / "shared" / "tools" / "kube"))
IMAGE = "speculator-arena-runner:ci"  # the one image the stand-in's node holds
TASK = "local-smollm2"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _readable_by_others(path: Path) -> bool:
    """Whether a process of another uid reaches `path`: every directory above it searchable by
    others, the file itself readable by others."""
    path = path.resolve()
    for p in [*reversed(path.parents), path]:
        mode = p.stat().st_mode
        if p != path and not mode & 0o001:
            return False
    return bool(path.stat().st_mode & 0o004)


def cluster_unavailable() -> str | None:
    """Why the cluster tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "the kubelet stand-in needs root (bind mounts, setns, the pods' runAsUser)"
    if not (KUBE_TOOLS / "up").is_file():
        return f"no Kubernetes control plane tools at {KUBE_TOOLS} (set ARENA_KUBE_TOOLS)"
    if shutil.which("etcd") is None:
        return "etcd is not installed (apt-get install -y etcd-server; scripts/setup.sh does it as root)"
    for tool in ("openssl", "unshare", "ip", "xz"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    for p in (Path(sys.executable), REPO / "speculator_arena" / "__init__.py"):
        if not _readable_by_others(p):
            return f"{p} is not readable by other uids: the pods' containers could not run it"
    probe = subprocess.run(["unshare", "--mount", "--net", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"no mount or network namespaces here: {probe.stderr.strip()}"
    return None


def readable_dir(prefix: str) -> Path:
    """Not under /tmp: the pods mount an emptyDir there, which would hide the image's staged
    protocol and the volumes' directories from their containers."""
    d = Path(tempfile.mkdtemp(prefix=prefix, dir="/var/tmp"))
    os.chmod(d, 0o755)
    return d


@dataclass
class Cluster:
    run_dir: Path
    kubeconfig: str
    artifacts: Path
    results: Path
    protocol_dir: Path
    runner_uid: int
    engine_uid: int
    node: object  # KubeletStandIn
    env: dict  # ARENA_K8S_* and the rest a launcher of the tests needs


@pytest.fixture(scope="module")
def kube_control_plane(tmp_path_factory):
    """(run dir, kubeconfig) of a control plane up for the cluster tests' module; `down` at its end.
    Module-scoped, not session-scoped: its four processes would otherwise run beside every later
    test, the session's real evaluation too, whose host-contention rule counts their CPU."""
    why = cluster_unavailable()
    if why:
        pytest.skip(f"no real control plane: {why}")
    run_dir = tmp_path_factory.mktemp("kube")
    ports = {k: str(_free_port()) for k in ("APISERVER_PORT", "ETCD_PORT", "ETCD_PEER_PORT", "KCM_PORT", "SCHED_PORT")}
    t0 = time.monotonic()
    up = subprocess.run(
        [str(KUBE_TOOLS / "up"), str(run_dir)], env={**os.environ, **ports}, capture_output=True, text=True, timeout=180
    )
    try:
        assert up.returncode == 0, f"`up` failed ({up.returncode}): {up.stderr[-3000:]}"
        print(f"[kube] control plane up in {time.monotonic() - t0:.1f} s", file=sys.stderr)
        yield run_dir, up.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run([str(KUBE_TOOLS / "down"), str(run_dir)], capture_output=True, timeout=120)
        left = _processes_naming(str(run_dir))
        assert not left, f"`down` left processes of the control plane behind: {left}"


def _processes_naming(text: str) -> list[str]:
    """pid and command line of every process whose command line holds `text`."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != os.getpid():
            try:
                cmd = Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in cmd:
                out.append(f"{d}: {cmd[:200]}")
    return out


def _free_uid(after: int = 0) -> int:
    import pwd

    from speculator_arena.runners.lifecycle import _proc_pids

    for uid in range(61_100 + after, 62_000):
        try:
            pwd.getpwuid(uid)
        except KeyError:
            if not _proc_pids(uid=uid):
                return uid
    raise RuntimeError("no free uid")


def _wait(pred, what: str, timeout: float = 60):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        got = pred()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def kube_cluster(kube_control_plane, built_local, smollm2_target, tmp_path_factory):
    """The control plane with one GPU node, the arena's namespace objects and two volumes whose
    PersistentVolumes are local directories: the artifacts (pools, the sealed target, stand-in
    engines) and the results. The staged CI protocol is part of the node's one image."""
    from kubernetes import client, config

    from speculator_arena.backends.kubernetes import manifests
    from speculator_arena.backends.kubernetes.settings import KubernetesSettings
    from speculator_arena.runners.lifecycle import stage_tree

    sys.path.insert(0, str(REPO / "tests" / "runners"))
    from ci_profile import stage_ci_protocol
    from stand_in import FAST, make_engine

    from .kubelet_standin import Image, KubeletStandIn

    run_dir, kubeconfig = kube_control_plane
    base = readable_dir("arena-kube-")
    artifacts, results, protocol = base / "artifacts", base / "results", base / "protocol"
    for d in (artifacts, results, protocol):
        d.mkdir(mode=0o755)
    stage_ci_protocol(protocol, **FAST)
    shutil.copytree(built_local["root"], artifacts / "pools" / TASK)
    stage_tree(smollm2_target, artifacts / "checkpoints" / TASK)
    make_engine(artifacts / "engines", "ok")
    for root, dirs, files in os.walk(base):
        for n in dirs:
            os.chmod(Path(root) / n, 0o755)
        for n in files:  # readable by the pods' uids (a hard-linked target's own inode: add, never take)
            f = Path(root) / n
            os.chmod(f, f.stat().st_mode | 0o444)

    runner_uid = _free_uid()
    engine_uid = _free_uid(runner_uid - 61_100 + 1)
    s = KubernetesSettings(runner_uid=runner_uid, engine_uid=engine_uid)
    api = config.new_client_from_config(config_file=kubeconfig)
    core = client.CoreV1Api(api)
    core.create_namespace(manifests.namespace(s))
    for claim, path in zip(manifests.volume_claims(s), (artifacts, results), strict=True):
        core.create_persistent_volume(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": f"{claim.metadata.name}-local"},
                "spec": {
                    "capacity": claim.spec.resources.requests,
                    "accessModes": claim.spec.access_modes,
                    "storageClassName": "",
                    "persistentVolumeReclaimPolicy": "Retain",
                    "hostPath": {"path": str(path), "type": "Directory"},
                    "claimRef": {"namespace": s.namespace, "name": claim.metadata.name},
                },
            }
        )
        core.create_namespaced_persistent_volume_claim(s.namespace, claim)
    for claim in (s.artifacts_claim, s.results_claim):
        _wait(
            lambda c=claim: core.read_namespaced_persistent_volume_claim(c, s.namespace).status.phase == "Bound",
            f"PVC {claim} bound",
        )
    venv_bin = Path(sys.executable).parent
    image = Image(
        env={
            "PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin",
            "PYTHONPATH": str(REPO),
            "ARENA_PROTOCOL_DIR": str(protocol),
            "OMP_NUM_THREADS": "1",
            "TOKENIZERS_PARALLELISM": "false",
        },
        cwd=str(REPO),
        paths=(str(REPO), sys.prefix),  # a clone under /tmp is not hidden by the pod's /tmp volume
    )
    node = KubeletStandIn(kubeconfig, "gpu-node-1", base / "kubelet-1", {IMAGE: image}).start()
    _wait(lambda: core.read_node("gpu-node-1").status.allocatable.get("nvidia.com/gpu") == "1", "the node's GPU")
    env = {
        "ARENA_K8S_KUBECONFIG": kubeconfig,
        "ARENA_K8S_IMAGE": IMAGE,
        "ARENA_K8S_ARTIFACTS_ROOT": str(artifacts),
        "ARENA_K8S_RESULTS_ROOT": str(results),
        "ARENA_K8S_POLL_INTERVAL_S": "0.5",
        "ARENA_K8S_UNSCHEDULABLE_TIMEOUT_S": "4",
        "ARENA_K8S_LOG_READ_TIMEOUT_S": "15",  # a stream left open after its pod ended holds no test long
        "ARENA_K8S_RUNNER_UID": str(runner_uid),
        "ARENA_K8S_ENGINE_UID": str(engine_uid),
        "ARENA_PROTOCOL_DIR": str(protocol),
    }
    try:
        yield Cluster(run_dir, kubeconfig, artifacts, results, protocol, runner_uid, engine_uid, node, env)
    finally:
        node.stop()
        shutil.rmtree(base, ignore_errors=True)
    from speculator_arena.runners.lifecycle import _proc_pids

    left = {uid: _proc_pids(uid=uid) for uid in (runner_uid, engine_uid)}
    left["stand-in"] = _processes_naming("container_exec.py")
    assert not any(left.values()), f"the pods left processes behind: {left}"
