"""Whether this runner can start engines as their unprivileged user, checked before any work is
accepted (protocol section 7: the engine runs unprivileged).

Why a preflight: an engine is untrusted code. When the runner is root it starts every engine as
`arena-engine` (lifecycle.py), and that user must be able to read what the engine runs: the
interpreter, the arena's package and its site-packages (and vLLM's venv where installed). An
install under a private directory (a clone inside a `mktemp -d` folder, or under `/root`, mode
0700) is out of that user's reach. Engines then never run as root instead: `preflight` refuses
the command at once (`arena demo`, `arena evaluate`, `arena calibrate`, the queue's worker, the
API's intake), naming the first directory the user cannot traverse and the fix, and starts no
engine. The target and the speculator need no check here: the runner hard-links them into the
engine's workspace when their folders are private (lifecycle.stage_tree).

A runner that is not root (a laptop) cannot switch users: engines run as its own user, and every
start records it (`engine_starts.unprivileged` false, shown on the evaluation's page). A
participant's submission is never run that way unless the operator says so with
ARENA_ALLOW_UNISOLATED_SUBMISSIONS; in a Kubernetes pod the engine's own container and uid isolate
it (sidecar_engine.py), so nothing is checked here.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

from speculator_arena import settings
from speculator_arena.errors import ArenaError

ENGINE_USER = "arena-engine"
DOC = "docs/operators/engine-sandbox.md"


class PrivilegeRefused(RuntimeError, ArenaError):
    """Engines cannot run unprivileged here and will not run otherwise: the arena's side (an
    install its engine user cannot reach, a runner that cannot drop privileges for a submission),
    never the engine's fault."""


def engine_runtime_paths() -> list[Path]:
    """What every engine of the arena's reads: the interpreter (resolved), the arena's package (the
    engines' PYTHONPATH) and the venv's site-packages; vLLM's CPU venv only where it is installed."""
    import speculator_arena

    paths = [
        Path(sys.executable).resolve(),
        Path(speculator_arena.__file__).parent,
        Path(sysconfig.get_paths()["purelib"]),
    ]
    vllm_venv = Path(settings.get("ARENA_VLLM_VENV"))
    if vllm_venv.is_dir():
        paths.append(vllm_venv)
    return paths


def _as_user(user: str, *test: str) -> bool:
    return subprocess.run(["runuser", "-u", user, "--", "test", *test], capture_output=True).returncode == 0


def user_can_read(user: str, paths: list[Path]) -> list[Path]:
    """The paths `user` cannot read (a directory: read and enter), checked as that user (runuser),
    not guessed from mode bits."""
    bad = []
    for p in paths:
        test = ["-r", str(p)] + (["-a", "-x", str(p)] if Path(p).is_dir() else [])
        if not _as_user(user, *test):
            bad.append(Path(p))
    return bad


def blocking_directory(user: str, path: Path) -> Path | None:
    """The first directory above `path` (from /) that `user` cannot enter, or None."""
    for parent in reversed(Path(path).parents):
        if not _as_user(user, "-x", str(parent)):
            return parent
    return None


def unreachable_reason(user: str, missing: list[Path]) -> str:
    """One line: what `user` cannot reach, the directory that stops it, and the fix."""
    first = missing[0]
    block = blocking_directory(user, first)
    where = f" (the directory {block} is closed to other users)" if block else " (its own mode bits)"
    fix = (
        f"install the arena where every user can enter the folders (for example /opt/arena or /srv/arena), "
        f"or open the folders above it to others (chmod o+x {block})"
        if block
        else f"make it readable by others (chmod o+rX {first})"
    )
    return (
        f"engines must run as the unprivileged user {user}, which cannot reach {first}{where}; "
        f"the arena never runs an engine as root instead: {fix}; {DOC}"
    )


# How the engines of this runner are kept from the arena's files (the provenance says it).
ISOLATION_SIDECAR = "pod-two-containers"  # the engine in a container and uid of its own (sidecar_engine.py)
ISOLATION_USER = "unprivileged user"  # the runner (root) switched to arena-engine
ISOLATION_NONE = "none: the engine ran as the runner's user"


def isolation() -> str:
    if settings.get("ARENA_ENGINE_SIDECAR"):
        return ISOLATION_SIDECAR
    if os.geteuid() == 0 and not settings.flag("ARENA_NO_PRIVILEGE_DROP"):
        return ISOLATION_USER
    return ISOLATION_NONE


def preflight(*, submission: bool = False, backend: str = "local") -> str:
    """Refuse (PrivilegeRefused) before anything is accepted or stored when this runner cannot start
    engines as it must; return how it will start them. `submission`: a participant's engine, which
    runs as the runner's user only where the operator set ARENA_ALLOW_UNISOLATED_SUBMISSIONS.
    The kubernetes backend isolates engines in the pod (nothing to check on this machine)."""
    if backend == "kubernetes":
        return ISOLATION_SIDECAR
    iso = isolation()
    if iso == ISOLATION_USER:
        from speculator_arena.system_users import system_user

        system_user(ENGINE_USER)
        missing = user_can_read(ENGINE_USER, engine_runtime_paths())
        if missing:
            raise PrivilegeRefused(unreachable_reason(ENGINE_USER, missing))
    elif iso == ISOLATION_NONE and submission and not settings.flag("ARENA_ALLOW_UNISOLATED_SUBMISSIONS"):
        why = "privilege drop disabled by ARENA_NO_PRIVILEGE_DROP" if os.geteuid() == 0 else "it is not root"
        raise PrivilegeRefused(
            f"a participant's engine runs only unprivileged, and this runner cannot drop privileges "
            f"({why}); run the runner as root, or set ARENA_ALLOW_UNISOLATED_SUBMISSIONS=1 to run "
            f"submissions as the runner's user anyway (each evaluation's page then says so); {DOC}"
        )
    return iso


# The queue's worker runs the participants' engines; the API, often another process and user,
# accepts them. The worker records its preflight's verdict here at its start, and the API refuses
# new submissions while the last verdict is a refusal (nothing stored, the reason said).
VERDICT_FILE = "runs/engine-preflight.json"


def record_verdict(home, refusal: str | None) -> None:
    import time

    from speculator_arena.atomic import write_json_atomic

    path = Path(home) / VERDICT_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, {"refusal": refusal, "at": time.time(), "pid": os.getpid()})


def recorded_refusal(home) -> str | None:
    """The refusal the queue's worker last recorded (None: none, or no worker has checked yet)."""
    import json

    try:
        return json.loads((Path(home) / VERDICT_FILE).read_text()).get("refusal")
    except (OSError, ValueError, AttributeError):
        return None


def worker_preflight(home, backend: str = "local") -> str:
    """The queue worker's preflight (a participant's engine), recorded for the API either way."""
    try:
        iso = preflight(submission=True, backend=backend)
    except PrivilegeRefused as exc:
        record_verdict(home, str(exc))
        raise
    record_verdict(home, None)
    return iso
