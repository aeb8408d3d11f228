"""Start an engine directory's `launch.sh serve` on this machine and stop it (tests, benchmarks).

The runner has its own lifecycle (users, sealed mounts, memory sampling); this is the small
version that tests and `benchmarks/engine_tokens_per_second.py` need: the section 3 variables,
its own process group, `/health` polling, SIGTERM to the group then SIGKILL.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalEngine:
    def __init__(
        self,
        engine_dir: str | os.PathLike,
        target: str | os.PathLike,
        *,
        max_model_len: int = 2048,
        max_num_seqs: int = 4,
        served_name: str = "target",
        env: dict | None = None,
        log_path: str | os.PathLike | None = None,
        health_timeout: float = 180.0,
    ):
        self.engine_dir = Path(engine_dir).resolve()
        if not (self.engine_dir / "launch.sh").is_file():
            raise FileNotFoundError(f"{self.engine_dir} has no launch.sh")
        self.port = free_port()
        self.served_name = served_name
        self.health_timeout = health_timeout
        self.log_path = Path(log_path) if log_path else None
        base = {k: v for k, v in os.environ.items() if not k.startswith("DEV_ENGINE_")}
        pythonpath = os.pathsep.join(p for p in (str(REPO), base.get("PYTHONPATH", "")) if p)
        self.env = {
            **base,
            "TARGET": str(target),
            "ARTIFACT": str(target),
            "TOKENIZER": str(target),
            "GENERATION_CONFIG": str(target),
            "SPECULATOR": base.get("SPECULATOR", ""),
            "PORT": str(self.port),
            "SERVED_NAME": served_name,
            "MAX_MODEL_LEN": str(max_model_len),
            "MAX_NUM_SEQS": str(max_num_seqs),
            "GPU_MEMORY_UTILIZATION": base.get("GPU_MEMORY_UTILIZATION", "0.90"),
            "PREFIX_CACHING": "1",
            "ARENA_PYTHON": base.get("ARENA_PYTHON", sys.executable),
            "PYTHONPATH": pythonpath,
            **(env or {}),
        }
        self.proc: subprocess.Popen | None = None
        self._log = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> LocalEngine:
        self._log = open(self.log_path, "wb") if self.log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen(
            ["bash", str(self.engine_dir / "launch.sh"), "serve"],
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + self.health_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"engine {self.engine_dir.name} exited with {self.proc.returncode} before "
                    f"answering /health{'; log: ' + str(self.log_path) if self.log_path else ''}"
                )
            try:
                with urllib.request.urlopen(self.base_url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.3)
        self.stop()
        raise TimeoutError(f"engine {self.engine_dir.name} did not answer /health within {self.health_timeout} s")

    def stop(self, grace: float = 15.0) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            except ProcessLookupError:
                pass
        if self._log not in (None, subprocess.DEVNULL):
            self._log.close()
        self.proc = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
