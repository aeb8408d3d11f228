"""A kubelet stand-in for tests against a real control plane (../shared/tools/kube: API server,
scheduler and controllers, no kubelet, no container runtime), on the `kubernetes` client.

It plays one node's part: registers a `Node` with `nvidia.com/gpu` capacity and the GPU feature
discovery labels, keeps its `Lease` fresh and reports `Ready`; watches the pods bound to it and
runs their containers as local processes (container_exec.py: the pod's own network namespace,
so its loopback is its own, and process namespace, so its containers see each other's processes
and no other pod's; each volume mount a bind mount of a local directory at the
container's path; the container's runAsUser, runAsGroup, fsGroup); init containers in order,
native sidecars (`restartPolicy: Always`) kept running beside the main containers and stopped
after them; reports status through `pods/status` (phase, conditions, container states, exit
codes, reasons); serves `/containerLogs/...` over TLS (self-signed) on the node's kubelet port,
so the API server's `pods/log` works; enforces `activeDeadlineSeconds` (Failed,
DeadlineExceeded); honours deletion (SIGTERM, SIGKILL after the grace, terminal status, then
delete with grace 0). An image the node's image map does not hold cannot be pulled: the
container waits `ErrImagePull`, then `ImagePullBackOff`, as against a registry that refuses it.

What it cannot emulate (docs/operators/kubernetes.md): images (an image is a name for this machine's
interpreter and repository), cgroups (memory limits, OOM kills, CPU shares), the device plugin
(no GPU is handed out: `nvidia.com/gpu` is only counted by the scheduler), CNI and
NetworkPolicy (the pod's network namespace has a loopback and nothing else), seccomp and a
read-only root filesystem.

Needs root (bind mounts, setns, setuid); the fixture skips with the reason elsewhere.
"""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from kubernetes import client as k8s
from kubernetes import config, watch
from kubernetes.client.rest import ApiException

HERE = Path(__file__).resolve().parent
EXEC = HERE / "container_exec.py"
TICK = 0.1


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


@dataclass
class Image:
    """What an image name means on this node: the environment and working directory its
    containers start with (its ENV and WORKDIR), and the host directories that hold its files
    (this machine's repository and interpreter). A real image's files lie under no volume; here
    they may (a clone under /tmp, where the pod mounts an emptyDir), so a container gets each of
    them bound back, read-only, over a volume that would hide it."""

    env: dict[str, str]
    cwd: str
    paths: tuple[str, ...] = ()


def _pids_of_uid(uid: int, netns: str) -> list[int]:
    """The processes of `uid` in the pod's network namespace: what a container's cgroup would
    hold (its processes in sessions of their own included)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if os.stat(f"/proc/{d}").st_uid == uid and os.readlink(f"/proc/{d}/ns/net") == netns:
                    out.append(int(d))
            except OSError:
                pass
    return out


@dataclass
class Container:
    spec: dict
    init: bool
    log: Path
    proc: subprocess.Popen | None = None
    state: dict = field(default_factory=lambda: {"waiting": {"reason": "PodInitializing"}})
    restarts: int = 0
    uid: int = 0

    @property
    def name(self) -> str:
        return self.spec["name"]

    @property
    def sidecar(self) -> bool:
        return self.init and self.spec.get("restartPolicy") == "Always"

    @property
    def running(self) -> bool:
        return "running" in self.state

    @property
    def ended(self) -> bool:
        return "terminated" in self.state

    def status(self) -> dict:
        return {
            "name": self.name,
            "image": self.spec["image"],
            "imageID": "",
            "containerID": f"standin://{self.proc.pid}" if self.proc else None,
            "ready": self.running,
            "started": self.running,
            "restartCount": self.restarts,
            "state": self.state,
        }


class PodRun(threading.Thread):
    """One pod on the node, from its binding to its deletion."""

    def __init__(self, node: KubeletStandIn, pod: dict):
        super().__init__(daemon=True, name=f"pod-{pod['metadata']['name']}")
        self.node, self.pod = node, pod
        self.ns, self.name, self.uid = pod["metadata"]["namespace"], pod["metadata"]["name"], pod["metadata"]["uid"]
        self.dir = node.workdir / "pods" / self.uid
        (self.dir / "logs").mkdir(parents=True, exist_ok=True)
        spec = pod["spec"]
        self.containers = [Container(c, True, self.dir / "logs" / c["name"]) for c in spec.get("initContainers") or []]
        self.containers += [Container(c, False, self.dir / "logs" / c["name"]) for c in spec.get("containers") or []]
        self.gone = threading.Event()  # the API server no longer has the pod
        self.netns: subprocess.Popen | None = None
        self.phase, self.reason, self.message = "Pending", None, None
        self.start_time = now()
        self.last_pushed = None

    # ---- what the watch tells the pod ----------------------------------------------------------
    def update(self, pod: dict) -> None:
        self.pod = pod

    @property
    def deleting(self) -> bool:
        return bool(self.pod["metadata"].get("deletionTimestamp"))

    def container(self, name: str) -> Container | None:
        return next((c for c in self.containers if c.name == name), None)

    # ---- status ------------------------------------------------------------------------------
    def push(self) -> None:
        """The pod's status through `pods/status` (a strategic merge patch: the conditions the
        API server wrote, PodScheduled and DisruptionTarget, stay)."""
        ready = self.phase == "Running" and all(c.running for c in self.containers if not c.init)
        initialized = all(c.ended or c.running for c in self.containers if c.init)
        cond = lambda t, ok: {"type": t, "status": "True" if ok else "False", "lastTransitionTime": now()}  # noqa: E731
        status = {
            "phase": self.phase,
            "reason": self.reason,
            "message": self.message,
            "hostIP": "127.0.0.1",
            "hostIPs": [{"ip": "127.0.0.1"}],
            "startTime": self.start_time,
            "conditions": [
                cond("PodReadyToStartContainers", self.netns is not None),
                cond("Initialized", initialized),
                cond("ContainersReady", ready),
                cond("Ready", ready),
            ],
            "initContainerStatuses": [c.status() for c in self.containers if c.init],
            "containerStatuses": [c.status() for c in self.containers if not c.init],
        }
        key = json.dumps({k: v for k, v in status.items() if k != "conditions"}, sort_keys=True)
        if key == self.last_pushed:
            return
        try:
            self.node.core.patch_namespaced_pod_status(self.name, self.ns, {"status": status})
            self.last_pushed = key
        except ApiException as exc:
            if exc.status == 404:
                self.gone.set()
            else:
                raise

    # ---- containers ---------------------------------------------------------------------------
    def _volume_dir(self, vol: dict) -> Path:
        if "emptyDir" in vol:
            d = self.dir / "volumes" / vol["name"]
            d.mkdir(parents=True, exist_ok=True)
            os.chmod(d, 0o777)
            return d
        if "persistentVolumeClaim" in vol:
            claim = self.node.core.read_namespaced_persistent_volume_claim(
                vol["persistentVolumeClaim"]["claimName"], self.ns
            )
            pv = self.node.core.read_persistent_volume(claim.spec.volume_name)
            return Path(pv.spec.host_path.path)
        raise RuntimeError(f"volume {vol['name']}: only emptyDir and persistentVolumeClaim are emulated")

    def _start(self, c: Container) -> None:
        image = self.node.images.get(c.spec["image"])
        if image is None:
            reason = (
                "ErrImagePull" if c.state.get("waiting", {}).get("reason") != "ErrImagePull" else "ImagePullBackOff"
            )
            c.state = {
                "waiting": {
                    "reason": reason,
                    "message": f'failed to pull image "{c.spec["image"]}": not in the node\'s image map '
                    "(the kubelet stand-in pulls from no registry)",
                }
            }
            return
        pod_sc, sc = self.pod["spec"].get("securityContext") or {}, c.spec.get("securityContext") or {}
        uid = sc.get("runAsUser", pod_sc.get("runAsUser", 0))
        gid = sc.get("runAsGroup", pod_sc.get("runAsGroup", 0))
        groups = sorted(
            {g for g in [pod_sc.get("fsGroup"), *(pod_sc.get("supplementalGroups") or [])] if g is not None}
        )
        vols = {v["name"]: v for v in self.pod["spec"].get("volumes") or []}
        mounts = []
        for m in c.spec.get("volumeMounts") or []:
            src = self._volume_dir(vols[m["name"]])
            if m.get("subPath"):
                src = src / m["subPath"]
                src.mkdir(parents=True, exist_ok=True)
            mounts.append([str(src), m["mountPath"], bool(m.get("readOnly"))])
        roots = sorted(self.node.roots_for([m[1] for m in mounts]))
        hidden = [p for p in image.paths if any(p == m[1] or p.startswith(m[1].rstrip("/") + "/") for m in mounts)]
        env = {**image.env, **{e["name"]: e.get("value", "") for e in c.spec.get("env") or []}}
        payload = {
            "netns": f"/proc/{self.netns.pid}/ns/net",
            "pidns": f"/proc/{self.netns.pid}/ns/pid_for_children",
            "mounts": mounts,
            "roots": roots,
            "image_paths": hidden,
            "uid": uid,
            "gid": gid,
            "groups": groups,
            "cwd": c.spec.get("workingDir") or image.cwd,
            "env": env,
            "command": [*(c.spec.get("command") or []), *(c.spec.get("args") or [])],
        }
        log = open(c.log, "ab")  # noqa: SIM115 (the reader thread closes it)
        c.proc = subprocess.Popen(
            [sys.executable, str(EXEC), json.dumps(payload)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        c.uid = uid
        threading.Thread(target=_copy_log, args=(c.proc.stdout, log), daemon=True).start()
        c.state = {"running": {"startedAt": now()}}

    def _reap(self, c: Container) -> None:
        if c.proc is not None and c.running and c.proc.poll() is not None:
            code = c.proc.returncode
            code = 128 - code if code < 0 else code
            c.state = {
                "terminated": {
                    "exitCode": code,
                    "reason": "Completed" if code == 0 else "Error",
                    "startedAt": c.state["running"]["startedAt"],
                    "finishedAt": now(),
                }
            }

    def _kill(self, cs: list[Container], grace: float) -> None:
        """SIGTERM to each container's process group, SIGKILL after `grace`, then to whatever of
        its uid is left (the container's cgroup, for a uid of the pod's own)."""
        live = [c for c in cs if c.proc is not None and c.proc.poll() is None]
        for c in live:
            _signal_group(c.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while any(c.proc.poll() is None for c in live) and time.monotonic() < deadline:
            time.sleep(TICK)
        for c in live:
            _signal_group(c.proc.pid, signal.SIGKILL)
            c.proc.wait()
        net = os.readlink(f"/proc/{self.netns.pid}/ns/net") if self.netns and self.netns.poll() is None else None
        for c in cs:
            if net is not None and c.uid not in (0, os.getuid()):
                for pid in _pids_of_uid(c.uid, net):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            self._reap(c)

    # ---- the pod's life ------------------------------------------------------------------------
    def run(self) -> None:
        try:
            self._life()
        except Exception:
            traceback.print_exc()
        finally:
            self._kill(self.containers, 0)
            if self.netns is not None:
                self.netns.kill()
                self.netns.wait()

    def _deadline_passed(self) -> bool:
        limit = self.pod["spec"].get("activeDeadlineSeconds")
        return limit is not None and time.time() - _parse(self.start_time) > limit

    def _life(self) -> None:
        self.netns = _sandbox()
        self.push()
        inits = [c for c in self.containers if c.init]
        mains = [c for c in self.containers if not c.init]
        step, pulls = 0, 0.0
        while not self.gone.is_set():
            if self.deleting:
                return self._terminate()
            if self.phase in ("Succeeded", "Failed"):
                time.sleep(TICK)
                continue
            if self._deadline_passed():
                self._kill(self.containers, 0)
                self.phase, self.reason = "Failed", "DeadlineExceeded"
                self.message = "Pod was active on the node longer than the specified deadline"
                self.push()
                continue
            for c in self.containers:
                self._reap(c)
            if step < len(inits):  # init containers, in order
                c = inits[step]
                if c.proc is None and time.monotonic() >= pulls:
                    self._start(c)
                    pulls = time.monotonic() + 2  # the image pull's back-off
                if c.running and c.sidecar:
                    step += 1
                elif c.ended:
                    if c.state["terminated"]["exitCode"] != 0:
                        self.phase, self.reason = "Failed", None
                    step += 1
            else:
                for c in mains:
                    if c.proc is None and "terminated" not in c.state and time.monotonic() >= pulls:
                        self._start(c)
                        if not c.running:
                            pulls = time.monotonic() + 2
                if mains and all(c.running or c.ended for c in mains):
                    self.phase = "Running"
                for c in inits:  # a native sidecar that died is restarted while the pod runs
                    if c.sidecar and c.ended and not all(m.ended for m in mains):
                        c.restarts += 1
                        self._start(c)
                if mains and all(c.ended for c in mains):
                    grace = float(self.pod["spec"].get("terminationGracePeriodSeconds", 30))
                    self._kill([c for c in inits if c.sidecar], grace)
                    ok = all(c.state["terminated"]["exitCode"] == 0 for c in mains)
                    self.phase = "Succeeded" if ok else "Failed"
            self.push()
            time.sleep(TICK)

    def _terminate(self) -> None:
        """A deletion (graceful: an eviction or `delete`): stop every container within the grace,
        write the terminal status, then remove the pod with grace 0, as a kubelet does."""
        grace = self.pod["metadata"].get("deletionGracePeriodSeconds") or 0
        self._kill([c for c in self.containers if not c.init], float(grace))
        self._kill(self.containers, 0)
        if self.phase not in ("Succeeded", "Failed"):
            ok = all(c.ended and c.state["terminated"]["exitCode"] == 0 for c in self.containers if not c.init)
            self.phase = "Succeeded" if ok else "Failed"
        self.push()
        try:
            self.node.core.delete_namespaced_pod(
                self.name, self.ns, grace_period_seconds=0, body=k8s.V1DeleteOptions(preconditions={"uid": self.uid})
            )
        except ApiException as exc:
            if exc.status not in (404, 409):
                raise


# The pod's sandbox (the pause container's part): PID 1 of the pod's process namespace, which
# reaps what its containers orphan (a zombie of the engine's uid would read as a process left).
_PAUSE = """
import os, signal, subprocess
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD])
while True:
    signal.sigwait([signal.SIGCHLD])
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass
"""


def _sandbox() -> subprocess.Popen:
    """A pod's network and process namespaces: `unshare` (in the new network namespace, its
    `pid_for_children` the pod's process namespace) with the pause process as PID 1; killing
    `unshare` kills PID 1 (`--kill-child`), and with it every process of the pod."""
    proc = subprocess.Popen(
        ["unshare", "--net", "--pid", "--fork", "--kill-child", "--", sys.executable, "-c", _PAUSE],
        start_new_session=True,
    )
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")  # CONFIG_PROC_CHILDREN; else wait 1 s
    deadline = time.monotonic() + (10 if children.exists() else 1)
    while time.monotonic() < deadline:  # PID 1 first: a container forked before it would take its place
        if proc.poll() is not None:
            raise RuntimeError(f"the pod's sandbox ended at once ({proc.returncode})")
        try:
            if children.read_text().strip():
                break
        except OSError:
            pass
        time.sleep(0.02)
    time.sleep(0.3)  # the loopback up
    return proc


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _copy_log(pipe, log) -> None:
    """The container's output, one `<RFC 3339 time> <line>` per line (the CRI log's shape)."""
    with pipe, log:
        for line in iter(pipe.readline, b""):
            log.write(now().encode() + b" " + line if line.endswith(b"\n") else now().encode() + b" " + line + b"\n")
            log.flush()


class KubeletStandIn:
    """One GPU node. `start()` registers it and begins running the pods bound to it; `stop()`
    kills what runs and removes the node."""

    def __init__(
        self,
        kubeconfig: str,
        name: str,
        workdir: Path,
        images: dict[str, Image],
        *,
        gpus: int = 1,
        gpu_product: str = "NVIDIA-H200",
        cpu: str = "2",
        memory: str = "8Gi",
    ):
        self.api = config.new_client_from_config(config_file=kubeconfig)
        self.core = k8s.CoreV1Api(self.api)
        self.coord = k8s.CoordinationV1Api(self.api)
        self.name, self.workdir, self.images = name, Path(workdir), images
        self.gpus, self.gpu_product, self.cpu, self.memory = gpus, gpu_product, cpu, memory
        self.pods: dict[str, PodRun] = {}  # by uid
        self.stopping = threading.Event()
        self.made_roots: set[str] = set()
        self.server: ThreadingHTTPServer | None = None

    # ---- mount points -----------------------------------------------------------------------------
    def roots_for(self, targets: list[str]) -> set[str]:
        """Top-level directories of mount targets that the host lacks: made once (empty) and
        covered with a tmpfs in each container, so the host's tree is never written."""
        out = set()
        for t in targets:
            top = "/" + t.strip("/").split("/")[0]
            if not os.path.exists(top):
                os.makedirs(top, mode=0o755, exist_ok=True)
                self.made_roots.add(top)
            if top in self.made_roots:
                out.add(top)
        return out

    # ---- the node ----------------------------------------------------------------------------------
    def start(self) -> KubeletStandIn:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._serve_logs()
        labels = {
            "kubernetes.io/hostname": self.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": self.gpu_product,
        }
        self.core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": self.name, "labels": labels}})
        self._node_status()
        self._renew_lease()
        threading.Thread(target=self._heartbeat, daemon=True).start()
        threading.Thread(target=self._watch, daemon=True).start()
        return self

    def _node_status(self) -> None:
        capacity = {
            "cpu": self.cpu,
            "memory": self.memory,
            "pods": "110",
            "ephemeral-storage": "100Gi",
            "nvidia.com/gpu": str(self.gpus),
        }
        t = now()
        conds = [
            ("Ready", "True", "KubeletReady", "kubelet stand-in is posting ready status"),
            ("MemoryPressure", "False", "KubeletHasSufficientMemory", ""),
            ("DiskPressure", "False", "KubeletHasNoDiskPressure", ""),
            ("PIDPressure", "False", "KubeletHasSufficientPID", ""),
        ]
        info = dict.fromkeys(
            ("machineID", "systemUUID", "bootID", "kernelVersion", "osImage", "kubeProxyVersion"), "stand-in"
        )
        info.update(
            containerRuntimeVersion="standin://1",
            kubeletVersion="v1.36.2",
            operatingSystem="linux",
            architecture="amd64",
        )
        status = {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [
                {"type": k, "status": s, "reason": r, "message": m, "lastHeartbeatTime": t, "lastTransitionTime": t}
                for k, s, r, m in conds
            ],
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.port}},
            "nodeInfo": info,
        }
        self.core.patch_node_status(self.name, {"status": status})

    def _renew_lease(self) -> None:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": self.name, "leaseDurationSeconds": 40, "renewTime": now()},
        }
        try:
            self.coord.patch_namespaced_lease(self.name, "kube-node-lease", {"spec": body["spec"]})
        except ApiException as exc:
            if exc.status != 404:
                raise
            self.coord.create_namespaced_lease("kube-node-lease", body)

    def _heartbeat(self) -> None:
        while not self.stopping.wait(10):
            try:
                self._renew_lease()
                self._node_status()
            except Exception:
                traceback.print_exc()

    # ---- the pods ------------------------------------------------------------------------------------
    def _seen(self, pod: dict, deleted: bool = False) -> None:
        uid = pod["metadata"]["uid"]
        run = self.pods.get(uid)
        if deleted:
            if run is not None:
                run.gone.set()
            return
        if run is None:
            if pod["status"].get("phase") in ("Succeeded", "Failed") or pod["metadata"].get("deletionTimestamp"):
                return  # ended before this stand-in saw it (another run's pod)
            run = self.pods[uid] = PodRun(self, pod)
            run.start()
        else:
            run.update(pod)

    def _watch(self) -> None:
        selector = f"spec.nodeName={self.name}"
        while not self.stopping.is_set():
            try:
                listed = self.core.list_pod_for_all_namespaces(field_selector=selector)
                present = set()
                for p in listed.items:
                    d = self.api.sanitize_for_serialization(p)
                    present.add(d["metadata"]["uid"])
                    self._seen(d)
                for uid, run in self.pods.items():
                    if uid not in present:
                        run.gone.set()
                w = watch.Watch()
                for ev in w.stream(
                    self.core.list_pod_for_all_namespaces,
                    field_selector=selector,
                    resource_version=listed.metadata.resource_version,
                    timeout_seconds=5,
                ):
                    if self.stopping.is_set():
                        w.stop()
                        break
                    if ev["type"] in ("ADDED", "MODIFIED", "DELETED"):
                        self._seen(self.api.sanitize_for_serialization(ev["object"]), deleted=ev["type"] == "DELETED")
            except Exception:
                if not self.stopping.is_set():
                    traceback.print_exc()
                    time.sleep(0.5)

    def run_of(self, namespace: str, name: str) -> PodRun | None:
        """The newest run of the named pod on this node (tests use it to reach a container)."""
        runs = [r for r in self.pods.values() if (r.ns, r.name) == (namespace, name)]
        return runs[-1] if runs else None

    def logs_of(self, label: str, value: str, tail: int = 4000) -> str:
        """The end of every container log of the pods labelled `label=value` that ran here (a
        failing test prints them: the pods are gone by then)."""
        runs = [r for r in self.pods.values() if (r.pod["metadata"].get("labels") or {}).get(label) == value]
        return "\n".join(
            f"--- {r.name}/{c.name}\n{c.log.read_text(errors='replace')[-tail:]}"
            for r in runs
            for c in r.containers
            if c.log.exists()
        )

    # ---- logs ------------------------------------------------------------------------------------------
    def _serve_logs(self) -> None:
        certs = self.workdir / "kubelet-pki"
        certs.mkdir(exist_ok=True)
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={self.name}"]
            + [
                "-addext",
                "subjectAltName=IP:127.0.0.1",
                "-keyout",
                str(certs / "key.pem"),
                "-out",
                str(certs / "cert.pem"),
            ],
            check=True,
            capture_output=True,
        )
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(certs / "cert.pem", certs / "key.pem")
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _log_handler(self))
        self.server.daemon_threads = True
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.stopping.set()
        for run in list(self.pods.values()):
            run.gone.set()
        for run in list(self.pods.values()):
            run.join(timeout=15)
        if self.server is not None:
            self.server.shutdown()
        try:
            self.core.delete_node(self.name)
        except Exception:
            pass
        for top in self.made_roots:
            try:
                os.rmdir(top)
            except OSError:
                pass


def _log_handler(node: KubeletStandIn):
    class Logs(BaseHTTPRequestHandler):
        """GET /containerLogs/{namespace}/{pod}/{container}: follow, timestamps, sinceSeconds,
        tailLines, limitBytes, as the kubelet answers the API server's pods/log."""

        def log_message(self, *args):  # quiet
            pass

        def _fail(self, code: int, text: str) -> None:
            body = text.encode()
            self.send_response(code)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):  # noqa: N802
            url = urlparse(self.path)
            parts = url.path.strip("/").split("/")
            if len(parts) != 4 or parts[0] != "containerLogs":
                return self._fail(404, "not found")
            _, ns, pod, name = parts
            q = {k: v[-1] for k, v in parse_qs(url.query).items()}
            run = node.run_of(ns, pod)
            c = run.container(name) if run else None
            if c is None:
                return self._fail(404, f'container "{name}" in pod "{pod}" not found')
            if c.proc is None:
                reason = c.state.get("waiting", {}).get("reason", "ContainerCreating")
                return self._fail(400, f'container "{name}" in pod "{pod}" is waiting to start: {reason}')
            follow = q.get("follow") == "true"
            stamps = q.get("timestamps") == "true"
            since = time.time() - float(q["sinceSeconds"]) if "sinceSeconds" in q else None
            if "sinceTime" in q:
                since = _parse(q["sinceTime"])
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            with open(c.log, "rb") as fh:
                lines = fh.readlines()
                if "tailLines" in q:
                    lines = lines[-int(q["tailLines"]) :] if int(q["tailLines"]) else []
                while True:
                    for line in lines:
                        if not line.endswith(b"\n"):
                            fh.seek(-len(line), os.SEEK_CUR)  # a line still being written
                            break
                        ts, _, text = line.partition(b" ")
                        if since is not None and _parse(ts.decode()) < since:
                            continue
                        try:
                            self.wfile.write(line if stamps else text)
                            self.wfile.flush()
                        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                            return
                    if not follow or c.ended or run.gone.is_set():
                        time.sleep(0.3)  # the copier's last lines
                        rest = fh.readlines()
                        if not rest:
                            return
                        lines = rest
                        continue
                    time.sleep(TICK)
                    lines = fh.readlines()

    return Logs
