"""One task's calibration, step by step: the runs, the m/c fit, the candidate with its evidence.

The steps share files under the candidate's folder (`$ARENA_HOME/calibration/<task>/v<N>/`):
runs.json (run name -> evaluation id) and fit.json, so that the Dagster assets
(assets/calibration.py) and `arena calibrate` run the same steps and either can resume the other.
The evaluations, the m/c fit's short stock passes included, are run before the steps
(`run_evaluations`, through the one door the launcher passes); `step_runs` records the stored
evaluation that stands for each planned run and `step_fit` chooses m and c from the stored passes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from speculator_arena.calibration import fit as fit_mod
from speculator_arena.calibration.candidate import build_candidate, candidate_dir
from speculator_arena.calibration.plan import MIN_AA, Plan, plan
from speculator_arena.calibration.runs import resolve, run_plan
from speculator_arena.warehouse import Warehouse

SMALL_GRID = {"m": (1, 2), "c": (0.5, 2.0)}  # CI's reduced grid; operators run the full one


@dataclass
class CalibrationOptions:
    task_id: str
    candidate_version: int | None = None
    base_version: int | None = None
    aa_runs: int = MIN_AA
    controls: bool | None = None
    not_honest: tuple[str, ...] = ()
    fit: bool = True
    fit_grid: str = "full"  # full | small
    fit_pass_seconds: float | None = None
    target: str | None = None
    retries: int = 2
    adopt: dict[str, str] = field(default_factory=dict)

    def plan(self) -> Plan:
        return plan(
            self.task_id, self.base_version, self.candidate_version, self.aa_runs, self.controls, tuple(self.not_honest)
        )


def run_evaluations(wh: Warehouse, opts: CalibrationOptions, runner, progress=None) -> dict[str, str | None]:
    """The plan's evaluations not stored yet, each run by `runner` (the one door: runs.run_plan),
    then the m/c fit's grid points not stored yet, as one fit evaluation through the same door."""
    ids = run_plan(wh, opts.plan(), opts.target, opts.retries, progress, runner=runner, adopt=opts.adopt)
    if opts.fit:
        p = opts.plan()
        fit_mod.run_fit_passes(
            wh,
            p.task_id,
            p.base_version,
            p.candidate_version,
            opts.target,
            points_of(opts),
            opts.fit_pass_seconds,
            runner,
            progress,
        )
    return ids


def points_of(opts: CalibrationOptions) -> list[tuple[int, float]]:
    small = {"m_values": SMALL_GRID["m"], "c_values": SMALL_GRID["c"]} if opts.fit_grid == "small" else {}
    return fit_mod.grid(**small)


def step_runs(wh: Warehouse, opts: CalibrationOptions) -> dict[str, str | None]:
    """Per planned run, the stored evaluation that stands for it (runs.resolve), into runs.json."""
    p = opts.plan()
    ids = resolve(wh, p, opts.retries, opts.adopt)
    d = candidate_dir(wh.home, p.task_id, p.candidate_version)
    d.mkdir(parents=True, exist_ok=True)
    (d / "runs.json").write_text(json.dumps(ids, indent=2), encoding="utf-8")
    return ids


def step_fit(wh: Warehouse, opts: CalibrationOptions, progress=None) -> dict | None:
    p = opts.plan()
    d = candidate_dir(wh.home, p.task_id, p.candidate_version)
    d.mkdir(parents=True, exist_ok=True)
    if not opts.fit:
        (d / "fit.json").write_text("null", encoding="utf-8")
        return None
    result = fit_mod.fit(
        wh, p.task_id, p.base_version, p.candidate_version, points_of(opts), opts.fit_pass_seconds, progress
    )
    (d / "fit.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    return result


def step_candidate(wh: Warehouse, opts: CalibrationOptions, progress=None) -> dict:
    p = opts.plan()
    d = candidate_dir(wh.home, p.task_id, p.candidate_version)
    for name in ("runs.json", "fit.json"):
        if not (d / name).exists():
            raise FileNotFoundError(f"{d / name} is missing: run the calibration's earlier steps first")
    ids = json.loads((d / "runs.json").read_text(encoding="utf-8"))
    fit_result = json.loads((d / "fit.json").read_text(encoding="utf-8"))
    return build_candidate(wh, p, ids, fit_result, progress)


def resolve_versions(opts: CalibrationOptions) -> CalibrationOptions:
    """Fix the base and candidate numbers once, so every step (and a resumed one) names the same runs."""
    from speculator_arena.protocol import load_protocol

    if opts.base_version is None:
        opts.base_version = load_protocol().version
    if opts.candidate_version is None:
        opts.candidate_version = opts.plan().candidate_version
    return opts


def calibrate(wh: Warehouse, opts: CalibrationOptions, runner, progress=None) -> dict:
    """Every step in order; returns the evidence."""
    resolve_versions(opts)
    run_evaluations(wh, opts, runner, progress)
    step_runs(wh, opts)
    step_fit(wh, opts, progress)
    return step_candidate(wh, opts, progress)
