"""The A/A noise of the embedded task, before and after a fix, in one run (issue 21).

    python3 benchmarks/aa_noise.py --home DIR [--runs 6] [--variants v2-small-pages,v3-huge-pages]

Makes `--runs` A/A evaluations per variant (the task's `kind: none` reference against the stock
engine, on the dev split, through the arena's one door, so each is an ordinary stored evaluation
of the calibration account, id `aa-noise-<variant>-<k>`, adoptable by `arena calibrate --adopt`),
alternating the variants' order from one round to the next (A B, B A, ...) so a slow drift of the
machine falls on both alike. A run voided because the host was contended is made again (twice at
most). Re-running the command reuses every stored measured run.

Variants: `v2-small-pages`, as before the fix (protocol v2's passes, 3 of 5 s per workload, and
THP_MEM_ALLOC_ENABLE=0: torch's CPU allocator on 4 KiB pages, set for both engines alike through
the runner's placement variables) and `v3-huge-pages`, after it (v3's passes, 3 of 8 s, and huge
pages), and `v3-small-pages` (v3's passes alone, the development engine's default).

Prints, per variant: the A/A SpecScores, mean and max |1 - SpecScore|, the spread between engine
starts (the standard deviation over evaluations of the log of the matched-request time ratio:
the same request, seed and reply length served by the candidate's start and the stock's, so the
prompts' mix cancels) and the composition noise (the standard deviation of the log pass ratios
about their evaluation's matched ratio, with the requests a pass holds), and from these the
SpecScore spread that longer passes would leave. Writes the figures to `<home>/aa_noise.json` and
a plot to `<home>/aa_noise.png`. Run it on an idle machine: nothing else may use the CPU.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# variant -> (protocol version, None: the latest; the runner's placement variables for both engines)
VARIANTS = {
    "v2-small-pages": (2, {"THP_MEM_ALLOC_ENABLE": "0"}),
    "v3-huge-pages": (3, {"THP_MEM_ALLOC_ENABLE": "1"}),
    "v3-small-pages": (3, {"THP_MEM_ALLOC_ENABLE": "0"}),  # v3's passes alone (the engine's default)
    # v4: two passes of 12 s per workload, mirrored pairing (C S S C), huge pages set by the version
    "v4": (4, {}),
    # v8: the interleaved pairing (both engines resident, the idle one frozen, A B B A per pass,
    # six passes of fixed work per workload; issue 31)
    "v8": (8, {}),
    # v9: v8's interleaved pairing in four passes per workload (one A B, B A, B A, A B cycle)
    "v9": (9, {}),
    # a draft v12 staged in ARENA_PROTOCOL_DIR (not shipped): more, shorter turns (issue 31)
    "v12-draft": (12, {}),
    # a draft v13 staged in ARENA_PROTOCOL_DIR (benchmarks/v13-draft.yaml): v12 with the passes sliced
    # (both engines serve each pass at once, thawed in turn 0.2 s each: runners/sliced.py)
    "v13-draft": (13, {}),
    # a draft v14 staged in ARENA_PROTOCOL_DIR (benchmarks/v14-draft.yaml): v13 with local-smollm2-vllm
    # paired as local-smollm2 is (interleaved, sliced); run with --task local-smollm2-vllm
    "v14-draft": (14, {}),
    # a draft v15 staged in ARENA_PROTOCOL_DIR (benchmarks/v15-draft.yaml): v14 with local-smollm2-vllm's
    # workloads each served by fresh starts of both engines; run with --task local-smollm2-vllm
    "v15-draft": (15, {}),
    # a draft v16 (benchmarks/v16-draft.yaml): v15-draft with each workload's starts and warm-ups in
    # turn A B, B A, A B (the engine started first was about 1% slower); run with --task local-smollm2-vllm;
    # shipped as v15 (its values, derived from these runs)
    "v16-draft": (16, {}),
}


def say(msg: str) -> None:
    print(f"[aa-noise {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


ATTEMPTS = "aa_noise_attempts.json"  # planned run -> the ids of its attempts (a contended run is made again)


def attempts(home: Path) -> dict[str, list[str]]:
    p = home / ATTEMPTS
    return json.loads(p.read_text()) if p.exists() else {}


def stored_measured(home: Path, evaluation_id: str) -> str | None:
    """The measured attempt of a planned run already stored (the run itself, or its re-runs)."""
    from speculator_arena.warehouse import Warehouse
    from speculator_arena.warehouse.evaluations import status_of

    wh = Warehouse(home)
    for eid in [evaluation_id, *attempts(home).get(evaluation_id, [])]:
        if status_of(wh, eid) == "measured":
            return eid
    return None


def ended_unmeasured(home: Path, evaluation_id: str) -> str | None:
    """The final status of a planned run that ended without a measurement (its last attempt
    failed or void), or None."""
    from speculator_arena.rules.status import FINAL, MEASURED
    from speculator_arena.warehouse import Warehouse
    from speculator_arena.warehouse.evaluations import status_of

    last = [evaluation_id, *attempts(home).get(evaluation_id, [])][-1]
    status = status_of(Warehouse(home), last)
    return getattr(status, "value", status) if status in FINAL and status != MEASURED else None


def run_variant(home: Path, task_id: str, variant: str, k: int, target: str) -> str | None:
    from speculator_arena.dagster_project import launch
    from speculator_arena.protocol import load_protocol
    from speculator_arena.rules.accounts import CALIBRATION_ACCOUNT
    from speculator_arena.runners.spec import calibration_spec

    planned = f"aa-noise-{variant}-{k}"
    done = stored_measured(home, planned)
    if done:
        say(f"{planned}: stored ({done})")
        return done
    ended = ended_unmeasured(home, planned)
    if ended:  # failed, or void after its re-runs: a later run number takes its place
        say(f"{planned}: stored as {ended}, not made again")
        return None
    ref = next(r for r in load_protocol().task(task_id).task.references if r.kind == "none")
    version, env = VARIANTS[variant]
    spec = calibration_spec(
        task_id=task_id,
        engine=ref.engine,
        evaluation_id=planned,
        label=f"aa-noise {variant} {k}",
        account_id=CALIBRATION_ACCOUNT,
        protocol_version=version,
        target=target,
        solution_kind="none",
    )
    saved = {v: os.environ.get(v) for v in env}
    os.environ.update(env)
    try:
        s = launch.evaluate(spec, home, progress=say, rerun_contended=2)
    finally:
        for v, old in saved.items():
            if old is None:
                os.environ.pop(v, None)
            else:
                os.environ[v] = old
    tried = attempts(home)
    tried[planned] = [a.evaluation_id for a in s.attempts]
    (home / ATTEMPTS).write_text(json.dumps(tried, indent=1))
    say(f"{planned}: {s.status} {s.why[:200]}")
    return s.evaluation_id if s.status == "measured" else None


def matched_ratios(home: Path) -> dict[tuple[str, str, int], tuple[int, float]]:
    """(evaluation, workload, pass index) -> (matched requests, candidate/stock time ratio)."""
    import duckdb

    sql = (Path(__file__).with_suffix(".sql")).read_text()
    rows = duckdb.execute(sql, {"requests": str(home / "raw" / "requests" / "*" / "*.parquet")}).fetchall()
    return {(e, w, int(i)): (n, r) for e, w, i, n, r in rows}


def start_pairs(home: Path, eid: str) -> list[list[int] | None]:
    """The pass indices each pair of candidate and stock starts served: one pair under sequential
    pairing, two under mirrored (the provenance's `timed_starts`; absent before v4: one pair
    serving every pass index, None)."""
    from speculator_arena.warehouse import Warehouse
    from speculator_arena.warehouse.evaluations import current_row

    starts = json.loads(current_row(Warehouse(home), eid)["provenance"]).get("timed_starts")
    return [s["passes"] for s in starts if s["engine"] == "candidate"] if starts else [None]


def sd(xs: list[float]) -> float:
    if len(xs) < 2:
        return float("nan")
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def figures(home: Path, ids: dict[str, list[str]]) -> dict:
    from speculator_arena.calibration.derive import BOUND_GATES
    from speculator_arena.dagster_project import launch

    scores = launch.score(home)
    ev = scores.evaluations.set_index("evaluation_id")
    gates = scores.gates.set_index(["evaluation_id", "gate"])
    passes = scores.passes
    matched = matched_ratios(home)
    out = {}
    for variant, eids in ids.items():
        specscores, between, per_eval, resid, per_pass_requests, n_passes = [], [], [], [], [], []
        scored = []  # the runs with a SpecScore, in order
        for eid in eids:
            s = ev.loc[eid, "specscore"] if eid in ev.index else None
            if s is None or (isinstance(s, float) and math.isnan(s)):
                continue
            specscores.append(float(s))
            scored.append(eid)
            mine = passes[passes.evaluation_id == eid]
            for w, g in mine.groupby("workload"):
                for i, x in zip(g.pass_index, g.ratio):
                    n, r = matched.get((eid, w, int(i)), (0, float("nan")))
                    if n and x and x > 0:
                        resid.append(math.log(x) - math.log(r))
                per_pass_requests += [int(x) for x in g.requests]
                n_passes.append(len(g))
            # one log matched ratio per pair of starts (the candidate's start against the stock's
            # on the same requests), averaged over workloads; the evaluation's is their mean
            pair_logs = []
            for indices in start_pairs(home, eid):
                logs = [
                    math.log(r)
                    for (e, w, i), (n, r) in matched.items()
                    if e == eid and n and (indices is None or i in indices)
                ]
                if logs:
                    pair_logs.append(sum(logs) / len(logs))
            between += pair_logs
            if pair_logs:
                per_eval.append(sum(pair_logs) / len(pair_logs))
        dev = [abs(1 - s) for s in specscores]
        sigma_pass = sd(resid)
        # the bound gates' rows of the runs that have a SpecScore, in their order (stage_speed_noise
        # re-derives the bounds from them: an A/A run's D is 0, its standard error is the probes')
        bound_rows = {
            gate: {
                col: [float(gates.at[(e, gate), col]) for e in scored]
                for col in ("statistic", "se", "ci_low", "ci_high")
            }
            for gate in BOUND_GATES
        }
        req = sum(per_pass_requests) / max(len(per_pass_requests), 1)
        passes_per_score = sum(n_passes) / max(len(specscores), 1)
        out[variant] = {
            "evaluations": eids,
            "specscores": [round(s, 4) for s in specscores],
            "bound_gates": bound_rows,
            "mean_abs_error": round(sum(dev) / len(dev), 4) if dev else None,
            "max_abs_error": round(max(dev), 4) if dev else None,
            # the spread of one candidate start against one stock start (the same requests)
            "between_start_sd": round(sd(between), 4),
            "start_pairs": len(between),
            # what an evaluation sees of it: its pairs' mean (one pair under sequential pairing)
            "evaluation_matched_sd": round(sd(per_eval), 4),
            # the candidate's starts against the stock's on the same requests: 1 unless the order of
            # the starts makes one of them faster
            "matched_time_ratio": round(math.exp(sum(per_eval) / len(per_eval)), 4) if per_eval else None,
            "pass_composition_sd": round(sigma_pass, 4),
            "requests_per_pass": round(req, 2),
            "passes_per_evaluation": passes_per_score,
            # composition noise of a SpecScore if each pass held x times the requests (sd ~ 1/sqrt(n))
            "composition_sd_of_specscore_by_pass_scale": {
                str(x): round(sigma_pass / math.sqrt(max(passes_per_score, 1) * x), 4) for x in (1, 2, 3, 4)
            },
        }
    return out


def held_out(specscores: list[float], n: int, prediction: bool = True) -> dict:
    """The noise derived from all runs but the last `n`, and whether each of those falls within
    its max (docs/scoring.md's speed noise: mean and max |1 - SpecScore| over the A/A runs; the
    max at least their 99% prediction bound, from v13: calibration/derive.py `speed_noise`)."""
    from speculator_arena.calibration.derive import PREDICTION_RULE, speed_noise

    derive, check = specscores[:-n], specscores[-n:]
    noise = speed_noise(derive, prediction=prediction)
    worst = noise["max_abs_error"]
    held = [round(abs(1 - s), 4) for s in check]
    return {
        "derived_from": len(derive),
        "mean_abs_error": noise["mean_abs_error"],
        "max_abs_error": worst,
        **({"max_rule": PREDICTION_RULE, "observed_max_abs_error": noise["observed_max_abs_error"],
            "prediction_bound": noise["prediction_bound"]} if prediction else {}),
        "held_out_errors": held,
        "all_within": worst is not None and all(e <= worst for e in held),
    }  # fmt: skip


def rebound(task: dict, v: dict, n: int) -> dict:
    """Set the task's likelihood and first-choice bounds from the first `n` runs' gate rows by the
    calibration's rule (calibration/derive.py `bound`: no honest interval beyond, at least the
    largest honest standard error, plus a step); return each bound's evidence. A/A runs are
    honest runs whose probes are the version's: their standard errors of D are what the bounds
    must cover (v12: v11's runs, whose D is 0 and whose intervals alone left the bounds at 0.005)."""
    from speculator_arena.calibration.derive import BOUND_GATES, BOUND_RULE, bound

    out = {}
    for gate, key in BOUND_GATES.items():
        rows = {col: xs[:n] for col, xs in v["bound_gates"][gate].items()}
        b = bound(rows["ci_low"], rows["ci_high"], rows["se"])
        out[key] = {"gate": gate, "bound": b, "previous": task["limits"][key], "rule": BOUND_RULE, **rows}
        task["limits"][key] = b
    return out


def stage_speed_noise(
    task_id: str,
    variant: str,
    v: dict,
    home: Path,
    folder: Path,
    recalibrate_latest: bool = False,
    rebound_gates: bool = False,
) -> Path:
    """vN.yaml = the latest version with `task_id`'s speed noise (mean and max |1 - S| of the
    derivation runs) and dev/test gap (5 x the max, SCORING.md), and vN.speed_noise.json: every
    run's id and SpecScore, which were held out, and whether each held-out run fell within the
    max. Its gate limits stay the latest's, whose evidence stays with the version that derived
    them (a pairing changes the speeds, not the probes).

    `recalibrate_latest`: N is the latest version itself, a draft whose scoring of the task changed
    (v11's steal correction) and whose noise must be derived under it (the runs are scored under
    the latest version); the evidence names the task's values that changed from N-1 beside the noise.
    `rebound_gates`: the likelihood and first-choice bounds re-derived from the same runs (`rebound`)."""
    import yaml

    from speculator_arena.protocol import load_protocol
    from speculator_arena.protocol.version_files import available_versions, version_path

    latest = load_protocol().version
    # a draft staged beside the shipped versions may skip a number (v16-draft over v14): its base is
    # the version before it that exists
    base = max(n for n in available_versions() if n < latest) if recalibrate_latest else latest
    held = v["held_out"]
    if not held["all_within"]:
        raise SystemExit(f"a held-out A/A run lies beyond the derived max {held['max_abs_error']}: not staged")
    doc = yaml.safe_load(version_path(latest).read_text())
    version = latest if recalibrate_latest else latest + 1
    task = doc["tasks"][task_id]
    bounds = rebound(task, v, held["derived_from"]) if rebound_gates else {}
    if not recalibrate_latest:
        doc["version"], doc["published"] = version, time.strftime("%Y-%m-%d")
        doc["notes"] = (
            f"v{base} with {task_id}'s speed noise and dev/test gap calibrated under its pairing from "
            f"{held['derived_from']} A/A runs and checked on {len(held['held_out_errors'])} held-out ones "
            f"(benchmarks/aa_noise.py; evidence in v{version}.speed_noise.json); every other value as v{base}"
        )
    before = yaml.safe_load(version_path(base).read_text())["tasks"][task_id]
    changed = sorted(
        k for k in set(before) | set(task) if k not in ("speed_noise", "dev_test_gap") and before.get(k) != task.get(k)
    )
    task["speed_noise"] = {"mean_abs_error": held["mean_abs_error"], "max_abs_error": held["max_abs_error"]}
    task["dev_test_gap"] = round(5 * held["max_abs_error"], 4)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"v{version}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False, width=110))
    evidence = {
        "task_id": task_id,
        "version": version,
        "base_version": base,
        # the task's values that changed from the base beside the noise (a re-scoring version's)
        "scoring_changes": changed,
        "variant": variant,
        "evaluations": v["evaluations"],
        "specscores": v["specscores"],
        **held,
        **({"bounds": bounds} if bounds else {}),
        "made_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": f"python benchmarks/aa_noise.py --home {home} --task {task_id} --variants {variant} --runs "
        f"{len(v['specscores'])} --check {len(held['held_out_errors'])} --stage-version DIR"
        + (" --recalibrate-latest" if recalibrate_latest else "")
        + (" --rebound" if rebound_gates else ""),
    }
    (folder / f"v{version}.speed_noise.json").write_text(json.dumps(evidence, indent=1))
    return folder / f"v{version}.yaml"


def plot(fig: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    f, ax = plt.subplots(figsize=(6, 3.2))
    for i, (variant, v) in enumerate(fig.items()):
        ax.scatter([i] * len(v["specscores"]), v["specscores"], label=variant)
    ax.axhline(1.0, color="grey", lw=0.8)
    for y in (0.95, 1.05):
        ax.axhline(y, color="grey", lw=0.6, ls=":")
    ax.set_xticks(range(len(fig)), list(fig))
    ax.set_ylabel("A/A SpecScore")
    ax.set_title("A/A SpecScores (dotted: the 5% goal)")
    f.tight_layout()
    f.savefig(path, dpi=120)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", required=True, help="an ARENA_HOME of its own (pools and target are made if missing)")
    ap.add_argument("--task", default="local-smollm2")
    ap.add_argument("--runs", type=int, default=6)
    ap.add_argument("--variants", default="v3-small-pages,v4")
    ap.add_argument("--report-only", action="store_true", help="print the figures of the stored runs")
    ap.add_argument(
        "--stage-version",
        type=Path,
        help="with --check: write the next protocol version into this folder: the latest with the task's "
        "speed noise and dev/test gap derived from the last variant's runs (held-out ones excepted), "
        "and vN.speed_noise.json, its evidence",
    )
    ap.add_argument(
        "--recalibrate-latest",
        action="store_true",
        help="with --stage-version: derive the noise of the latest version itself (a draft whose scoring "
        "changed, which scores the runs) instead of staging the next one",
    )
    ap.add_argument(
        "--rebound",
        action="store_true",
        help="with --stage-version: re-derive the likelihood and first-choice bounds from the derivation "
        "runs' gate rows as well (v12: at least one standard error of D)",
    )
    ap.add_argument(
        "--check",
        type=int,
        default=0,
        help="the last N runs of each variant are held out: the noise is derived from the others, and "
        "every held-out run must fall within their max (a calibration checked on runs it was not tuned on)",
    )
    args = ap.parse_args()
    home = Path(args.home).resolve()
    os.environ["ARENA_HOME"] = str(home)
    variants = args.variants.split(",")
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        ap.error(f"unknown variants {sorted(unknown)}; known: {sorted(VARIANTS)}")
    from speculator_arena.checkpoints import prepare_checkpoint
    from speculator_arena.dagster_project import launch
    from speculator_arena.pools.api import PoolNotBuilt, load_pool

    try:
        load_pool(args.task, "dev", home=home)
    except PoolNotBuilt:
        say("building the pools")
        launch.build_pools(args.task, home=str(home))
    target = str(prepare_checkpoint(args.task, home=home))
    ids: dict[str, list[str]] = {v: [] for v in variants}
    t0 = time.time()
    for k in range(1, args.runs + 1):
        order = variants if k % 2 else variants[::-1]
        for variant in order:
            eid = (
                stored_measured(home, f"aa-noise-{variant}-{k}")
                if args.report_only
                else run_variant(home, args.task, variant, k, target)
            )
            if eid:
                ids[variant].append(eid)
        if not args.report_only:
            say(f"round {k}/{args.runs} done, {time.time() - t0:.0f} s")
    fig = figures(home, ids)
    (home / "aa_noise.json").write_text(json.dumps(fig, indent=1))
    plot(fig, home / "aa_noise.png")
    for variant, v in fig.items():
        print(
            f"{variant:12s} n {len(v['specscores'])}  mean |1-S| {v['mean_abs_error']}  max |1-S| {v['max_abs_error']}  "
            f"between-start sd {v['between_start_sd']} ({v['start_pairs']} start pairs; per evaluation {v['evaluation_matched_sd']}, "
            f"matched time ratio {v['matched_time_ratio']})  pass composition sd {v['pass_composition_sd']} "
            f"({v['requests_per_pass']} requests/pass)  SpecScores {v['specscores']}"
        )
    if len(fig) == 2:
        a, b = (fig[v] for v in variants)
        if a["mean_abs_error"] and b["mean_abs_error"]:
            print(
                f"ratio {variants[1]}/{variants[0]}: mean |1-S| {b['mean_abs_error'] / a['mean_abs_error']:.2f}, "
                f"between-start sd {b['between_start_sd'] / a['between_start_sd']:.2f}"
            )
    if args.check:
        for variant, v in fig.items():
            held = held_out(v["specscores"], args.check)
            fig[variant]["held_out"] = held
            print(
                f"{variant:12s} derived from {held['derived_from']} runs: mean |1-S| {held['mean_abs_error']} "
                f"max |1-S| {held['max_abs_error']}; held-out |1-S| {held['held_out_errors']}: "
                f"{'all within the max' if held['all_within'] else 'NOT all within the max'}"
            )
        (home / "aa_noise.json").write_text(json.dumps(fig, indent=1))
        if args.stage_version:
            out = stage_speed_noise(
                args.task,
                variants[-1],
                fig[variants[-1]],
                home,
                args.stage_version,
                args.recalibrate_latest,
                args.rebound,
            )
            print(f"staged {out} with its evidence beside it")
    print(f"figures: {home / 'aa_noise.json'}; plot: {home / 'aa_noise.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
