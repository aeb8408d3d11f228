"""`python -m speculator_arena.backends.kubernetes.engine_sidecar`: the command of the evaluation
pod's engine container, which starts and stops engines when the runner asks.

Why a supervisor and not `launch.sh` as the container's command: one evaluation starts engines
four times (the candidate, the stock engine, both again for the probes, each a fresh process),
and a container's command runs once. The supervisor runs under the engine container's uid, sees
only what that container mounts (the sealed target, the speculator, the engines; no pool, no
results), and listens on the pod's loopback for the runner (runners/sidecar_engine.py holds the
other side and says what the runner checks for itself). It answers:

- `GET /hello`: its pid and uid, how many engines it started (0 when the runner first asks) and
  the GPU its container's NVML shows (device 0: the one the device plugin gave the container);
- `POST /start` {src, env, port, name}: unpack the engine and run `launch.sh serve` in its own
  process group, as the runner does on a machine (runners/lifecycle.py's `EngineRun`, without a
  user switch); 422 with the reason when it cannot be started;
- `GET /engine`: whether the engine's process runs, its exit code once it ended;
- `POST /stop` {grace_s}: SIGTERM to the group, SIGKILL after the grace, then (with `--own-uid`,
  which the pod sets: the container's uid is the engine's alone) SIGKILL to every other process of
  this uid; removal of the shared memory that appeared since the supervisor started; the log.

Why the stdlib's `http.server`: a handful of JSON calls from one client on loopback, in the
engine's container where nothing of the arena's API runs.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from speculator_arena.runners.lifecycle import EngineRun, EngineStartError, _proc_pids, remove_shm
from speculator_arena.runners.memory import Device
from speculator_arena.runners.sidecar_engine import DEVICE_VARIABLES

MODULE = "speculator_arena.backends.kubernetes.engine_sidecar"
KILL_WITHIN_S = 15.0


def sidecar_command(listen: str, scratch: str) -> list[str]:
    return ["python", "-m", MODULE, "--listen", listen, "--scratch", scratch, "--own-uid"]


class EngineSupervisor:
    """One engine at a time, in this container, under this uid."""

    def __init__(self, scratch: Path, own_uid: bool = False):
        self.scratch, self.own_uid = scratch, own_uid
        self.shm_at_start = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
        self.engine: EngineRun | None = None
        self.starts = 0
        self.lock = threading.Lock()
        d = Device.open()
        self.gpu = {"uuid": d.uuid, "name": d.name, "reason": d.reason}

    def hello(self) -> dict:
        return {"pid": os.getpid(), "uid": os.getuid(), "starts": self.starts, "gpu": self.gpu}

    def _env(self, env: dict) -> dict:
        env = {k: str(v) for k, v in env.items() if k not in DEVICE_VARIABLES}
        env.update({k: os.environ[k] for k in DEVICE_VARIABLES if k in os.environ})
        if not env.get("SPECULATOR"):  # protocol section 3: an empty directory when there is none
            empty = self.scratch / "empty-speculator"
            empty.mkdir(parents=True, exist_ok=True)
            env["SPECULATOR"] = str(empty)
        return env

    def start(self, body: dict) -> tuple[int, dict]:
        with self.lock:
            if self.engine is not None and self.engine.alive():
                return 409, {"error": f"the {self.engine.engine} engine is still running: stop it first"}
            self.starts += 1
            er = EngineRun(
                engine=str(body["name"]),
                purpose="sidecar",
                start_index=self.starts,
                src=Path(body["src"]),
                env_vars=self._env(body.get("env") or {}),
                port=int(body["port"]),
                private_root=self.scratch / "logs",
                drop_privileges=False,
            )
            try:
                er.start([])
            except EngineStartError as exc:
                er.cleanup()
                return 422, {"error": str(exc)}
            self.engine = er
            return 200, {"pgid": er.proc.pid, "started_at": er.started_at}

    def state(self) -> dict:
        er = self.engine
        if er is None or er.proc is None:
            return {"running": False, "exit_code": None}
        code = er.proc.poll()
        return {"running": code is None, "pgid": er.proc.pid, "exit_code": code}

    def stop(self, body: dict) -> tuple[int, dict]:
        with self.lock:
            er = self.engine
            if er is None:
                return 200, {"stop_signal": None, "exit_code": None, "log": "", "left": []}
            er.stop(float(body.get("grace_s", 10.0)))
            left = self.kill_the_rest() if self.own_uid else []
            remove_shm(owner_uid=os.getuid(), only_new=self.shm_at_start)
            self.engine = None
            return 200, {"stop_signal": er.stop_signal, "exit_code": er.exit_code, "log": er.log_text(), "left": left}

    def kill_the_rest(self) -> list[int]:
        """SIGKILL every process of this uid but this one (an engine's escaped children)."""
        me, deadline = os.getpid(), time.time() + KILL_WITHIN_S
        while True:
            left = [p for p in _proc_pids(uid=os.getuid()) if p != me]
            if not left or time.time() >= deadline:
                return left
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.1)


def handler(sup: EngineSupervisor):
    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path == "/hello":
                return self._send(200, sup.hello())
            if self.path == "/engine":
                return self._send(200, sup.state())
            return self._send(404, {"error": f"no {self.path}"})

        def do_POST(self):
            n = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(n) or b"{}")
            except ValueError as exc:
                return self._send(400, {"error": f"not JSON: {exc}"})
            routes = {"/start": sup.start, "/stop": sup.stop}
            if self.path not in routes:
                return self._send(404, {"error": f"no {self.path}"})
            try:
                return self._send(*routes[self.path](body))
            except (KeyError, TypeError, ValueError) as exc:
                return self._send(400, {"error": f"bad request: {type(exc).__name__}: {exc}"})

        def log_message(self, fmt, *args):
            print(f"[engine sidecar] {fmt % args}", file=sys.stderr, flush=True)

    return Handler


def serve(listen: str, scratch: Path, own_uid: bool = False) -> ThreadingHTTPServer:
    host, port = listen.rsplit(":", 1)
    scratch.mkdir(parents=True, exist_ok=True)
    return ThreadingHTTPServer((host, int(port)), handler(EngineSupervisor(scratch, own_uid)))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--listen", required=True, help="host:port on the pod's loopback (the runner's ARENA_ENGINE_SIDECAR)"
    )
    p.add_argument("--scratch", required=True, help="this container's writable directory (engine logs, workspaces)")
    p.add_argument(
        "--own-uid",
        action="store_true",
        help="every other process of this uid is an engine's: SIGKILL them all at each stop (the pod's container)",
    )
    args = p.parse_args(argv)
    server = serve(args.listen, Path(args.scratch), args.own_uid)
    print(f"[engine sidecar] uid {os.getuid()} listening on {args.listen}", file=sys.stderr, flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # the kubelet stops the sidecar after the runner
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
