"""An evaluation's status, persisted, and the runner's own state file.

Status lives in the warehouse's `evaluations` row (rewritten atomically, one part named
`evaluation`), so the board and the scorer read it where they read everything else. The
runner also keeps `$ARENA_HOME/runs/<id>/state.json` (atomic rename): its pid and host, the
phase it is in, and the engine's process group, so that a later runner can tell a live run from
a dead one and kill what a dead runner left behind.

The statuses and what they mean are rules/status.py's; the current row is read by
warehouse/evaluations.py.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from speculator_arena.atomic import write_json_atomic
from speculator_arena.errors import ArenaError
from speculator_arena.rules import status as S
from speculator_arena.warehouse.store import Warehouse


class EvaluationStateError(RuntimeError, ArenaError):
    """An evaluation cannot be started or resumed in its present state."""


def runs_dir(wh: Warehouse, evaluation_id: str) -> Path:
    d = wh.home / "runs" / evaluation_id
    d.mkdir(parents=True, exist_ok=True)
    return d


def write_state(wh: Warehouse, evaluation_id: str, **fields) -> dict:
    path = runs_dir(wh, evaluation_id) / "state.json"
    state = read_state(wh, evaluation_id) or {}
    state.update(fields, updated_at=time.time())
    write_json_atomic(path, state, indent=1, default=str)
    return state


def read_state(wh: Warehouse, evaluation_id: str) -> dict | None:
    path = wh.home / "runs" / evaluation_id / "state.json"
    if not path.exists():
        return None
    return json.loads(path.read_text())


def write_status(
    wh: Warehouse,
    row: dict,
    status: str,
    *,
    void_reason: str | None = None,
    failure_reason: str | None = None,
    provenance: dict | None = None,
) -> dict:
    """Rewrite the evaluation's one row with a new status (replace semantics, atomic)."""
    new = dict(row)
    new.update(status=S.check(status), updated_at=time.time())
    if void_reason is not None:
        new["void_reason"] = void_reason
    if failure_reason is not None:
        new["failure_reason"] = failure_reason
    if provenance is not None:
        prov = json.loads(new.get("provenance") or "{}")
        prov.update(provenance)
        new["provenance"] = json.dumps(prov, sort_keys=True, default=str)
    wh.write_rows("evaluations", new["evaluation_id"], [new], part="evaluation", replace=True)
    return new


def runner_alive(state: dict | None) -> bool:
    """Whether the runner recorded in `state` is still running (on this host)."""
    if not state or "pid" not in state:
        return False
    if state.get("host") != socket.gethostname():
        return True  # another host's runner: cannot tell from here, assume alive
    try:
        os.kill(int(state["pid"]), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A reused pid: the recorded start time of the process must match.
    try:
        started = _proc_start(int(state["pid"]))
    except OSError:
        return False
    return state.get("pid_start") is None or started == state.get("pid_start")


def _proc_start(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[19])


def own_identity() -> dict:
    pid = os.getpid()
    try:
        start = _proc_start(pid)
    except OSError:
        start = None
    return {"pid": pid, "pid_start": start, "host": socket.gethostname()}
