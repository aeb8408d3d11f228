"""LowBArena's calibration: BF16 served beside itself, several times, sets a task's A/A noise.

`arena calibrate --task <a LowBArena task>` runs the task's BF16 reference as a candidate beside
BF16 (`--aa` evaluations, each an ordinary stored evaluation through the one door; those already
measured under the same version in this ARENA_HOME count, so a calibration resumes), scores them,
and writes the next version of LowBArena's protocol as a candidate: the base version with the
task's `aa_noise` set from these runs (the largest |1 - LowBScore| and |1 - the speed gains'
geometric mean|, widened by a quarter, as the shipped embedded task's was) and the evidence.
The board's A/A line and the tests hold an A/A to it. `arena protocol publish --task ...
--candidate N` puts it in force; until then an operator can try it by pointing
ARENA_PROTOCOL_DIR at the candidates' folder (its files are named as staged versions are).

Why the runs are BF16's A/A alone: the rules set every gate's limit and the score's weights; what
a machine decides is how far BF16 strays from itself on it, which is what the board must not
read as a gain.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import yaml

WIDEN = 1.25  # the largest deviation seen, widened by a quarter
CANDIDATES = ("protocol", "lowb_candidates")  # under ARENA_HOME
MIN_RUNS = 2


def candidates_dir(home) -> Path:
    return Path(home).joinpath(*CANDIDATES)


def calibrate_lowb(task_id: str, home, runs: int, evaluate, *, progress=print, target: str | None = None) -> dict:
    """Run (or reuse) `runs` BF16 A/A evaluations of `task_id` under the latest LowBArena version
    and write the candidate version; returns {"version", "path", "noise", "evaluations"}.
    `evaluate(spec)` makes one evaluation and returns its summary: the one door
    (`launch.evaluate`), which sits above this package and is passed in by the command."""
    from speculator_arena.checkpoints import prepare_checkpoint
    from speculator_arena.errors import ArenaError
    from speculator_arena.pools.lowb.api import ItemPoolError, load_items
    from speculator_arena.pools.lowb.build import build_items
    from speculator_arena.protocol.lowb import load_lowb_protocol, lowb_available_versions
    from speculator_arena.rules.status import MEASURED
    from speculator_arena.runners.spec import reference_spec
    from speculator_arena.scoring.lowb import score_lowb
    from speculator_arena.warehouse import Warehouse

    if runs < MIN_RUNS:
        raise ArenaError(f"a LowBArena calibration needs at least {MIN_RUNS} A/A runs, not {runs}")
    proto = load_lowb_protocol()
    task = proto.task(task_id)
    ref = next((r for r in task.references if r.kind == "bf16" and not r.artifact), None)
    if ref is None:
        raise ArenaError(f"{task_id} declares no BF16 reference to serve beside itself")
    target = target or str(prepare_checkpoint(task_id, home=home))
    try:
        load_items(task_id, "dev", home)
    except ItemPoolError:
        progress(f"[calibrate] building {task_id}'s items")
        build_items(task_id, home)
    wh = Warehouse(home)
    done = aa_runs(wh, task_id, ref.name, proto.version)
    if done:
        progress(f"[calibrate] {len(done)} A/A run(s) already measured under p{proto.version}: {', '.join(done)}")
    while len(done) < runs:
        progress(f"[calibrate] A/A run {len(done) + 1}/{runs}: {ref.name} beside BF16")
        s = evaluate(reference_spec(task_id, ref, target))
        if s.status != MEASURED:
            raise ArenaError(f"A/A run {s.evaluation_id} ended {s.status}: {s.why}; nothing was written")
        done = aa_runs(wh, task_id, ref.name, proto.version)
    done = done[:runs]
    ev = score_lowb(wh, proto.version, evaluation_ids=done).evaluations.sort_values("evaluation_id")
    noise = aa_noise(ev["lowbscore"].tolist(), ev["speed_gmean"].tolist(), when=time.strftime("%Y-%m-%d"))
    version = max(lowb_available_versions() + [_latest_candidate(home)]) + 1
    path = write_candidate(home, proto.version, version, task_id, noise)
    evidence = {
        "task": task_id,
        "base_version": proto.version,
        "version": version,
        "made_at": time.time(),
        "noise": noise,
        "runs": ev[["evaluation_id", "lowbscore", "speed_gmean", "s_serve", "s_interactive", "s_long", "P", "kl"]]
        .astype(object)
        .to_dict(orient="records"),
    }
    path.with_suffix(".evidence.json").write_text(json.dumps(evidence, indent=1, default=str) + "\n")
    progress(
        f"[calibrate] candidate LowBArena p{version} ({path}): A/A noise ±{noise['max_abs_error']} on the score, "
        f"±{noise['speed_max_abs_error']} on speed, from {runs} runs"
    )
    return {"version": version, "path": path, "noise": noise, "evaluations": done}


def aa_runs(wh, task_id: str, label: str, version: int) -> list[str]:
    """The measured BF16 A/A evaluations of `task_id` run under LowBArena `version`, oldest first."""
    from speculator_arena.rules.status import MEASURED

    rows = wh.read_table("evaluations").to_pandas()
    if rows.empty:
        return []
    rows = rows.sort_values("updated_at")
    last = rows.drop_duplicates("evaluation_id", keep="last")
    mine = last[
        (last["task_id"] == task_id)
        & (last["label"] == label)
        & last["is_reference"]
        & (last["status"] == MEASURED)
        & (last["protocol_version"] == version)
        & (last["split"] == "dev")
    ]
    return list(mine.sort_values("created_at")["evaluation_id"])


def aa_noise(scores: list[float], speed_gmeans: list[float], *, when: str) -> dict:
    """The task's `aa_noise` from its A/A runs' LowBScores and speed gains' geometric means."""
    score_dev = max(abs(1 - x) for x in scores)
    speed_dev = max(abs(1 - x) for x in speed_gmeans)
    return {
        "runs": len(scores),
        "max_abs_error": round(WIDEN * score_dev, 3),
        "speed_max_abs_error": round(WIDEN * speed_dev, 3),
        "evidence": (
            f"arena calibrate, {when}: LowBScores {', '.join(f'{x:.3f}' for x in scores)} (max |1 - x| "
            f"{score_dev:.4f}); speed gains' geometric means {', '.join(f'{x:.3f}' for x in speed_gmeans)} "
            f"(max {speed_dev:.3f}); each widened by a quarter"
        ),
    }


def write_candidate(home, base: int, version: int, task_id: str, noise: dict) -> Path:
    """The base version with the task's `aa_noise` replaced, as `lowb-p<version>.yaml`."""
    from speculator_arena.protocol.lowb import lowb_version_files

    doc = yaml.safe_load(lowb_version_files()[base].read_text(encoding="utf-8"))
    doc["version"] = version
    doc["notes"] = f"p{base} with {task_id}'s A/A noise calibrated on this machine ({noise['runs']} BF16 A/A runs)"
    doc["tasks"][task_id]["aa_noise"] = noise
    out = candidates_dir(home)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"lowb-p{version}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")
    from speculator_arena.protocol.lowb import LowbProtocol

    LowbProtocol.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))  # a candidate that loads
    return path


def _latest_candidate(home) -> int:
    found = [int(p.name[6:-5]) for p in candidates_dir(home).glob("lowb-p*.yaml")]
    return max(found, default=0)


def publish_lowb(home, task_id: str, version: int) -> Path:
    """Put a LowBArena candidate in force: copied into ARENA_HOME's published versions, unchanged.
    A version already there is never replaced (versions are immutable)."""
    from speculator_arena.errors import ArenaError
    from speculator_arena.protocol.lowb import load_lowb_protocol, lowb_available_versions

    src = candidates_dir(home) / f"lowb-p{version}.yaml"
    if not src.is_file():
        raise ArenaError(f"no LowBArena candidate p{version} in {candidates_dir(home)}")
    if version in lowb_available_versions():
        raise ArenaError(f"LowBArena p{version} already exists; versions are never replaced")
    dest = Path(home) / "protocol" / "lowb_versions" / f"p{version}.yaml"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(src.read_bytes())
    task = load_lowb_protocol(version).task(task_id)  # it loads, and calibrated the task named
    if task.aa_noise is None:
        dest.unlink()
        raise ArenaError(f"LowBArena candidate p{version} sets no A/A noise for {task_id}")
    return dest
