"""`arena demo --task lowb-smollm2`: LowBArena's main job on the embedded default.

Its items built (HumanEval and RULER-style, public split), the sealed target prepared, the
references' checkpoints made from it on this machine (checkpoints/quantize.py), each reference
evaluated beside BF16 through the one door (`launch.evaluate`, as every evaluation), then every
stored LowBArena evaluation scored and the task's board printed with each reference's T, P, A
and g. Exits 0 only when every reference was measured and scored.
"""

from __future__ import annotations

import sys
import time

from speculator_arena.rules.status import MEASURED

# An evaluation voided by the host's other work is made again, four times at most. Why four (the
# speculator demo's two): on the 2-core VM the hypervisor's steal (7-26% of a pass, with nothing
# else running) voided 8 of 17 LowBArena attempts over two demos on 2026-12-06/07, each in its
# first minute, so a void costs 30-50 s; an evaluation's passes are one engine's at a time, where
# the speculator task's are interleaved, so one burst voids it.
DEMO_RERUNS = 4


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run_lowb_demo(task_id: str, home, only=None) -> int:
    from speculator_arena.checkpoints import prepare_checkpoint
    from speculator_arena.checkpoints.quantize import make_reference_checkpoint
    from speculator_arena.dagster_project import launch
    from speculator_arena.pools.lowb.build import build_items
    from speculator_arena.protocol.lowb import load_lowb_protocol
    from speculator_arena.runners.privileges import preflight
    from speculator_arena.runners.spec import reference_spec

    t0 = time.time()

    def step(msg: str) -> None:
        _say(f"[demo {time.time() - t0:5.0f} s] {msg}")

    task = load_lowb_protocol().task(task_id)
    preflight()  # an install its engine user cannot reach is refused now, before anything is built
    step(f"ARENA_HOME {home}; LowBArena task {task_id}")
    step("preparing the sealed target checkpoint")
    target = prepare_checkpoint(task_id, home=home)
    step(f"target ready: {target}")
    step("building the accuracy items and probe prompts")
    card = build_items(task_id, home)
    counts = card["counts"]["dev"]
    step(
        "items (dev): "
        + ", ".join(f"{n} {b}" for d in counts["items"].values() for b, n in d.items())
        + f", {counts['kl_prompts']} KL prompts; domains lacking: {', '.join(card['domains_lacking']) or 'none'}"
    )
    refs = [r for r in task.references if only is None or r.name in only]
    results = []
    for k, ref in enumerate(refs, 1):
        artifact = None
        if ref.artifact:
            step(f"making the {ref.artifact} checkpoint from the target")
            artifact = str(make_reference_checkpoint(task_id, ref.artifact, home))
        step(f"evaluation {k}/{len(refs)}: {ref.name} beside BF16")
        s = launch.evaluate(
            reference_spec(task_id, ref, str(target), artifact=artifact),
            home,
            progress=step,
            rerun_contended=DEMO_RERUNS,
        )
        results.append((ref.name, s))
        step(f"{ref.name}: {s.status}" + (f" ({s.why})" if s.why else ""))
    step("scoring every stored LowBArena evaluation")
    text, scores = lowb_board(home, task_id, "dev")
    print(text)
    print(figures_text(scores, [s.evaluation_id for _, s in results]))
    unmeasured = [(name, s) for name, s in results if s.status != MEASURED]
    for name, s in unmeasured:
        _say(f"[demo] {name}: NOT MEASURED, {s.status}: {s.why}")
    step(f"done in {time.time() - t0:.0f} s")
    return 1 if unmeasured else 0


def lowb_board(home, task_id: str, split: str):
    """(the board's text, the scores) of one LowBArena task, scored now from the raw rows."""
    from speculator_arena.board.lowb import lowb_board_rows, lowb_board_text
    from speculator_arena.pools.lowb.api import domains
    from speculator_arena.scoring.lowb import score_lowb
    from speculator_arena.warehouse import Warehouse

    wh = Warehouse(home)
    scores = score_lowb(wh)
    created = wh.read_table("evaluations").to_pandas()
    rows = lowb_board_rows(scores.evaluations, created, task_id, split)
    have = domains(task_id, home)
    note = (
        f"gated domains measured: {', '.join(have.gated_present) or 'none'}; "
        f"lacking: {', '.join(have.gated_lacking) or 'none'}"
    )
    from speculator_arena.protocol.lowb import load_lowb_protocol

    noise = load_lowb_protocol().task(task_id).aa_noise
    return lowb_board_text(rows, task_id, split, note, noise), scores


def figures_text(scores, evaluation_ids) -> str:
    """Each evaluation's axes with the figures under them, one block per evaluation."""
    ev = scores.evaluations.set_index("evaluation_id")
    out = []
    for eid in evaluation_ids:
        if eid not in ev.index:
            continue
        r = ev.loc[eid]
        out.append(
            f"{r['label']}: LowBScore {r['lowbscore']:.4f} = g {r['g']:g} x T {r['T']:.3f}^1/3 x P {r['P']:.3f}^1/3 "
            f"x A {r['A']:.3f}^1/3\n"
            f"    T: serve {r['s_serve']:.3f}x, interactive {r['s_interactive']:.3f}x, long {r['s_long']:.3f}x, "
            f"geometric mean {r['speed_gmean']:.3f}, generated length {100 * r['delta_l']:+.1f}%\n"
            f"    P: serve {r['c_serve']:.1f} vs {r['c_serve_bf16']:.1f}, long {r['c_long']:.1f} vs "
            f"{r['c_long_bf16']:.1f} requests at once\n"
            f"    A: drop {r['drop']:.2f} points, KL {r['kl']:.4f} nats/token, D {r['D']:.2f}; "
            f"perplexity vs BF16 {r['perplexity_ratio']:.4f}; "
            + (f"missed: {r['reason']}" if isinstance(r["reason"], str) and r["reason"] else "every gate passed")
        )
    return "\n".join(out)
