"""The evaluation pod's engine container, run on this machine as a kubelet would run it: the
command, environment and user the pod spec (manifests.evaluation_pod) gives that container, with
the container's own paths (its emptyDir, the loopback port) mapped to local ones. No mount
namespace: what the container mounts is asserted on the spec (tests/backends/test_manifests.py);
here the engine's user meets the runner's files by their modes, as a process of another uid.

Why our own: no kubelet can run here (../shared/FACTS.md); what matters of one here is the
process it starts, under which uid and groups, with which command and variables.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from speculator_arena.backends.kubernetes import manifests
from speculator_arena.backends.kubernetes.commands import example_spec
from speculator_arena.backends.kubernetes.settings import KubernetesSettings
from speculator_arena.protocol import load_protocol
from speculator_arena.runners.lifecycle import _proc_pids, free_port
from speculator_arena.runners.spec import REPO

ROOT = os.geteuid() == 0


def free_uid() -> int:
    """A uid with no account and no process here, for the engine's container."""
    import pwd

    for uid in range(61_000, 62_000):
        try:
            pwd.getpwuid(uid)
        except KeyError:
            if not _proc_pids(uid=uid):
                return uid
    raise RuntimeError("no free uid in 61000-61999")


def readable_dir(prefix: str) -> Path:
    """A directory every user may read (pytest's tmp_path is root's alone)."""
    d = Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(d, 0o755)
    return d


class EngineContainer:
    """The pod's engine container as a local process; `stop()` ends it and every process of its uid."""

    def __init__(self, scratch: Path, *, engine_uid: int | None = None, own_uid: bool = True, task="local-smollm2"):
        self.uid = engine_uid if engine_uid is not None else (free_uid() if ROOT else os.geteuid())
        s = KubernetesSettings(engine_uid=self.uid)
        pod = manifests.to_dict(
            manifests.evaluation_pod(example_spec(task, None), load_protocol().task(task), s, name="p")
        )
        (container,) = pod["spec"]["initContainers"]
        self.spec = container
        self.listen = f"127.0.0.1:{free_port()}"
        cmd = [sys.executable if a == "python" else a for a in container["command"]]
        cmd[cmd.index("--listen") + 1] = self.listen
        cmd[cmd.index("--scratch") + 1] = str(scratch)
        if not own_uid or not ROOT:  # without a uid of its own it must not kill what shares the uid
            cmd.remove("--own-uid")
        env = {e["name"]: e["value"] for e in container["env"]}
        env.update(  # the container's own emptyDirs (its scratch, its /tmp), here under `scratch`
            HOME=str(scratch / "home"),
            XDG_CACHE_HOME=str(scratch / "cache"),
            TMPDIR=str(scratch / "tmp"),
            PATH=f"{Path(sys.executable).parent}:/usr/bin:/bin",
            PYTHONPATH=str(REPO),
        )
        (scratch / "tmp").mkdir(parents=True, exist_ok=True)
        ids = {}
        if ROOT:
            sc = container["securityContext"]
            for d in (scratch, scratch / "tmp"):
                os.chown(d, sc["runAsUser"], sc["runAsGroup"])
            # A kubelet adds the pod's fsGroup to every container's groups.
            ids = dict(
                user=sc["runAsUser"], group=sc["runAsGroup"], extra_groups=[pod["spec"]["securityContext"]["fsGroup"]]
            )
        self.log = scratch.parent / f"{scratch.name}.log"
        with open(self.log, "wb") as fh:
            self.proc = subprocess.Popen(
                cmd, env=env, cwd=str(scratch), stdout=fh, stderr=subprocess.STDOUT, start_new_session=True, **ids
            )

    def stop(self) -> None:
        """SIGTERM (as the kubelet does once the runner ended), then SIGKILL to whatever of the
        engine's uid is left (only a uid of its own: root's run picked a free one)."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if ROOT and self.uid != os.geteuid():
            for _ in range(50):
                left = _proc_pids(uid=self.uid)
                if not left:
                    break
                for pid in left:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                time.sleep(0.1)


def remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
