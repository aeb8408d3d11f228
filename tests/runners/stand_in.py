"""Engine directories around the stdlib SSE stand-in (sse_engine.py), shared by the runner's
fixtures and the pool fixtures' test-split evaluation; the short profile and the spec of the
evaluations made with it (test_failures.py, test_malformed_output.py); the reason the arena
records for each malformed shape the stand-in can stream (sse_engine.MALFORMED).

The server runs under the venv's interpreter (scripts/setup.sh builds the venv on the system
Python when it runs as root, so the engine's user can run it, as it runs the development engine):
it reads the target's tokenizer with `tokenizers` to answer prompt_logprobs at the arena's token
positions. The system Python has no `tokenizers`, and a stand-in started with it answers no
fidelity probe.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from sse_engine import MALFORMED

HERE = Path(__file__).resolve().parent
ENGINE_PYTHON = sys.executable


def make_engine(root: Path, name: str, mode: str = "normal", extra_env: dict | None = None) -> Path:
    """An engine directory: launch.sh runs sse_engine.py (copied in) with ENGINE_MODE set."""
    d = root / name
    d.mkdir(parents=True)
    shutil.copy(HERE / "sse_engine.py", d / "sse_engine.py")
    exports = "".join(f"export {k}='{v}'\n" for k, v in (extra_env or {}).items())
    (d / "launch.sh").write_text(
        "#!/bin/bash\nset -e\n"
        f"export ENGINE_MODE='{mode}'\n{exports}"
        'cd "$(dirname "$0")"\n'
        f"exec {shlex.quote(ENGINE_PYTHON)} sse_engine.py\n"
    )
    return d


# The profile of the stand-in's evaluations: passes of one second, a short grace and health wait.
FAST = {
    "workloads": {
        w: {
            "interleave": 1 if w == "solo" else 2,
            "pass_seconds": 1,
            "speed": "request_time" if w == "solo" else "busy_window",
        }
        for w in ("solo", "team", "busy")
    },
    "start_stop": {"health_timeout_seconds": 3, "sigterm_grace_seconds": 3},
    "grace_seconds": 5,
}


def stand_in_spec(eid: str, cand: Path, stock: Path, built: dict):
    """An evaluation of the local task with these engine directories, on the built home's target."""
    from speculator_arena.runners.spec import EvaluationSpec

    return EvaluationSpec(
        task_id="local-smollm2",
        engine=str(cand),
        stock_engine=str(stock),
        evaluation_id=eid,
        label=eid,
        target=str(built["target"]),
    )


def run_stand_in(eid: str, cand: Path, stock: Path, built: dict, attempts: int = 3) -> dict:
    """Run the evaluation of `stand_in_spec` quietly and score it: its id, status, current row, the
    warehouse and its scored row (the fixtures of test_malformed_output.py and test_mirrored.py).

    An evaluation void because the machine was contended is made again under a fresh id, `attempts`
    times in all (SCORING.md "Host contention": the operator re-runs it; CI's VM is busy now and
    then, and the shipped foreign-CPU limit stays), as tests/real_evaluation.py does."""
    from speculator_arena.runners.harness import Evaluation
    from speculator_arena.scoring import score_warehouse
    from speculator_arena.warehouse import Warehouse
    from speculator_arena.warehouse.evaluations import current_row

    spec, wh = stand_in_spec(eid, cand, stock, built), Warehouse(built["home"])
    for attempt in range(1, attempts + 1):
        status = Evaluation(spec, home=built["home"], progress=lambda m: None).run()
        row = current_row(wh, spec.evaluation_id)
        if not str(row["void_reason"]).startswith("host contended") or attempt == attempts:
            break
        print(f"[stand-in] {spec.evaluation_id} void ({row['void_reason']}): made again", file=sys.stderr)
        spec = spec.again()
    scored = score_warehouse(wh, evaluation_ids=[spec.evaluation_id]).evaluations.iloc[0]
    return {"eid": spec.evaluation_id, "status": status, "row": row, "wh": wh, "scored": scored}


@contextmanager
def staged_runs(root: Path, built: dict, overrides: dict, engine_env: dict | None = None) -> Iterator[Callable]:
    """A protocol version staged under `root` with `overrides` over the CI profile (in force while
    this is open), one stock stand-in, and `run(eid, mode="normal")`: an evaluation of a fresh
    candidate stand-in of that mode against it (the fixtures of test_interleaved.py and
    test_sliced.py). `engine_env`: variables both engines start with."""
    import pytest
    from ci_profile import stage_ci_protocol

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ARENA_PROTOCOL_DIR", str(root / "protocol"))
        stage_ci_protocol(root / "protocol", **{**FAST, **overrides})
        stock = make_engine(root / "engines", "stock", extra_env=engine_env)

        def run(eid: str, mode: str = "normal") -> dict:
            cand = make_engine(root / "engines", f"cand-{eid}", mode, extra_env=engine_env)
            return run_stand_in(eid, cand, stock, built)

        yield run


def run_with_escaped_spinner(eid: str, run) -> dict:
    """`run(eid)` (an interleaved evaluation) with a task that escaped the freezer: a spinner the
    test puts into the candidate's CPU accounting group only, which no engine can do itself
    (test_interleaved.py, test_sliced.py)."""
    from speculator_arena.runners.interleaved import engine_cgroup

    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    done = threading.Event()

    def plant():
        group = engine_cgroup(eid, "candidate")
        while not done.is_set():
            if group.cpuacct.exists():
                try:
                    (group.cpuacct / "cgroup.procs").write_text(str(spinner.pid))
                    return
                except OSError:
                    pass
            time.sleep(0.05)

    planter = threading.Thread(target=plant, daemon=True)
    planter.start()
    try:
        return run(eid)
    finally:
        done.set()
        spinner.kill()
        spinner.wait()


# What the arena records for a request whose stream carries each shape (sse_engine.MALFORMED).
MALFORMED_REASONS = {
    "choices_number": "SSE payload's choices is not a list: b'{\"choices\": 5}'",
    "content_number": "SSE payload's content is not a string: ",
    "broken_json": 'malformed SSE payload: b\'{"choices": [{"index": 0, "delta": {"content": "x"\'',
    "not_utf8": "SSE payload is not UTF-8: ",
    "broken_chunked": "RemoteProtocolError: malformed response: invalid literal for int() with base 16: b'zz'",
}
assert tuple(MALFORMED_REASONS) == MALFORMED
