"""LowBArena's BF16 A/A noise on the embedded task: BF16 served beside itself, several times.

    python3 benchmarks/lowb_aa_noise.py --home DIR [--runs 4] [--task lowb-smollm2]

Each run is an ordinary stored evaluation (the task's `bf16` reference through the one door,
`launch.evaluate`; a run voided because the host was contended is made again, twice at most);
re-running the command reuses the measured runs already stored in DIR. Prints, per run, the
speed ratios, their geometric mean, capacity, KL and the LowBScore, then the A/A noise the
protocol data records (`aa_noise` of the task in lowb_versions/pN.yaml): the largest |1 - x| of
the LowBScore and of the speed gains' geometric mean over the runs. Writes them to
`<home>/lowb_aa_noise.json`. Run it on an idle machine: nothing else may use the CPU.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", required=True)
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--task", default="lowb-smollm2")
    args = ap.parse_args()
    from speculator_arena.checkpoints import prepare_checkpoint
    from speculator_arena.dagster_project import launch
    from speculator_arena.pools.lowb.api import ItemPoolError, load_items
    from speculator_arena.pools.lowb.build import build_items
    from speculator_arena.protocol.lowb import load_lowb_protocol
    from speculator_arena.rules.status import MEASURED
    from speculator_arena.runners.spec import reference_spec
    from speculator_arena.scoring.lowb import score_lowb
    from speculator_arena.warehouse import Warehouse

    home = Path(args.home)
    task = load_lowb_protocol().task(args.task)
    target = prepare_checkpoint(args.task, home=home)
    try:
        load_items(args.task, "dev", home)
    except ItemPoolError:
        build_items(args.task, home)
    ref = next(r for r in task.references if r.kind == "bf16" and not r.artifact)
    wh = Warehouse(home)

    def measured() -> list[str]:
        ev = score_lowb(wh).evaluations
        return list(ev[(ev["task_id"] == args.task) & (ev["label"] == ref.name)]["evaluation_id"])

    while len(measured()) < args.runs:
        s = launch.evaluate(reference_spec(args.task, ref, str(target)), home, rerun_contended=2, analysts=False)
        print(f"[lowb-aa] {s.evaluation_id}: {s.status} {s.why}", file=sys.stderr, flush=True)
        if s.status != MEASURED:
            return 1
    ev = score_lowb(wh).evaluations
    ev = ev[ev["evaluation_id"].isin(measured())].sort_values("evaluation_id")
    cols = ["evaluation_id", "s_serve", "s_interactive", "s_long", "speed_gmean", "P", "kl", "lowbscore", "reason"]
    print(ev[cols].to_string(index=False))
    out = {
        "task": args.task,
        "runs": ev[cols].astype(object).where(ev[cols].notna(), None).to_dict(orient="records"),
        "max_abs_error": float((ev["lowbscore"] - 1).abs().max()),
        "speed_max_abs_error": float((ev["speed_gmean"] - 1).abs().max()),
    }
    (home / "lowb_aa_noise.json").write_text(json.dumps(out, indent=1))
    print(f"max |1 - LowBScore| {out['max_abs_error']:.4f}; max |1 - speed gmean| {out['speed_max_abs_error']:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
