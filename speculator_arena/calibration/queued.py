"""A calibration left to the queue (`arena calibrate --queue`): its evaluations run as the queue
runs submissions, one per free device, and its assets run once they are stored.

Why: `arena calibrate` runs a calibration's dozen evaluations one after the other in its own
process, holding the one device it runs on for hours, beside a queue that meanwhile starts
nothing there. Queued, each evaluation is an `evaluation` run the `calibration_queue` sensor
(assets/calibration.py) starts on a free device, tagged with it, exactly as it starts a
submission's, so several devices serve one calibration at once and the submissions wait their
turn between its runs instead of behind all of them.

The request is `queued.json` in the candidate's folder (`$ARENA_HOME/calibration/<task>/v<N>/`):
the calibration's config with its versions fixed. It is done when the candidate's evidence is
written (`evidence.json`, by the `protocol_candidate` asset); a queued calibration asks for its
runs in the order `arena calibrate` runs them (planned runs, then the m/c fit), the next attempt
of a run only after the last one ended void, and for its assets when nothing is left to run.
"""

from __future__ import annotations

import json
from pathlib import Path

from speculator_arena.atomic import atomic_path
from speculator_arena.calibration import fit as fit_mod
from speculator_arena.calibration.calibrate import CalibrationOptions, points_of
from speculator_arena.calibration.candidate import candidate_dir
from speculator_arena.calibration.runs import next_attempts

REQUEST = "queued.json"


def queue(home, task_id: str, candidate_version: int, config: dict) -> Path:
    """Leave the calibration of `task_id` (candidate `candidate_version`, `config` as the
    calibration assets take it, its versions fixed) to the queue; the request's path."""
    d = candidate_dir(home, task_id, candidate_version)
    d.mkdir(parents=True, exist_ok=True)
    with atomic_path(d / REQUEST) as tmp:
        tmp.write_text(json.dumps({"task_id": task_id, "config": config}, indent=2, sort_keys=True), encoding="utf-8")
    return d / REQUEST


def waiting(home) -> list[tuple[str, dict]]:
    """(task, config) of every queued calibration whose candidate has no evidence yet, oldest first."""
    root = Path(home) / "calibration"
    found = []
    for path in root.glob(f"*/v*/{REQUEST}") if root.is_dir() else []:
        if (path.parent / "evidence.json").exists():
            continue
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            found.append((path.stat().st_mtime_ns, doc["task_id"], doc["config"]))
        except (OSError, ValueError, KeyError):
            continue  # half-written by hand or gone: not a request
    return [(task, config) for _, task, config in sorted(found, key=lambda f: f[0])]


def next_runs(wh, opts: CalibrationOptions) -> tuple[list, bool]:
    """(the specs to run next for the calibration `opts`, whether any of its evaluations' rows says
    running: in flight, or its runner died, which `arena calibrate --candidate N` finishes as void
    and runs again). No spec and nothing pending: its evaluations are all stored, and its assets
    can run."""
    p = opts.plan()
    specs, pending = next_attempts(wh, p, opts.target, opts.retries, opts.adopt)
    if opts.fit:
        fit_spec, fit_pending = fit_mod.next_fit_spec(
            wh, p.task_id, p.base_version, p.candidate_version, opts.target, points_of(opts), opts.fit_pass_seconds
        )
        specs += [fit_spec] if fit_spec is not None else []
        pending |= fit_pending
    return specs, pending
