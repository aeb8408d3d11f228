"""How far apart two resident starts of the same engine serve the same requests, when they take
turns, under CPU placements (issue 31: what the interleaved pairing's A/A noise is made of).

    python benchmarks/interleave_noise.py --variants default,pin1 --blocks 24 --out DIR

For each variant, two starts of the stock development engine (`A` and `B`, the same placement)
are both resident; they take turns in the order A B, B A, B A, A B, ... (the one waiting is
stopped with SIGSTOP, as the arena's freezer stops an engine's group), each turn one block of the
same fixed work: `solo` (one request) and `team` (three requests at once), 32 tokens, fixed seeds,
prefix caching off. The log of A's time over B's time for one block is what one interleaved pass
of an A/A evaluation measures; its standard deviation over blocks, divided by the square root of
the blocks an evaluation holds, is the A/A spread that placement would leave.

Variants: `default` (the engines' own threads, no pinning: today's embedded task); `pin1` (one
thread per engine, both engines on CPU 1 while this client and the rest of the machine keep
CPU 0); `sampled` (`default` with the arena's own contention sampler running in this client during each
turn, at the embedded task's interval of 1 s, as in a timed pass); `slice` (the sliced pass of
runners/sliced.py: both engines get the block at once and are thawed in turn `--quantum` seconds
each, the other stopped; an engine's time is the sum of its turns until its block is answered).

Needs a quiet machine. Writes `DIR/interleave_noise.json` (every block; re-running appends).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import math
import os
import signal
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import engine_start_noise as esn  # noqa: E402  (the prompts, the engine's start and stop, the request)

PORTS = {"A": 18561, "B": 18562}
# variant -> (engine threads or None, CPUs the engines run on or None, CPUs this client runs on or None)
VARIANTS = {
    "default": (None, None, None),
    "pin1": (1, "1", {0}),
    "sampled": (None, None, None),  # default, with the arena's contention sampler during each turn
    "slice": (None, None, None),  # default's placement; the block served by both at once, in turns
}


def start(name: str, target: str, variant: str):
    threads, cpus, _ = VARIANTS[variant]
    extra = {"THP_MEM_ALLOC_ENABLE": "1", **({"DEV_ENGINE_THREADS": str(threads)} if threads else {})}
    return esn.start_engine(target, PORTS[name], extra, ["taskset", "-c", cpus] if cpus else [])


def block(name: str, kind: str, k: int, texts: list[str], sampled: bool = False) -> float:
    """Seconds engine `name` takes for block `k` of `kind` (the sampler's start and last reading
    fall outside the time)."""
    from speculator_arena.runners.contention import ContentionSampler

    port = PORTS[name]
    sampler = ContentionSampler(1.0).start() if sampled else None
    try:
        t = time.perf_counter()
        if kind == "solo":
            esn.post(texts[k % 6], 1000 + k, port)
        else:
            with cf.ThreadPoolExecutor(3) as pool:
                list(pool.map(lambda i: esn.post(texts[(k + i) % 6], 2000 + 3 * k + i, port), range(3)))
        return time.perf_counter() - t
    finally:
        if sampler is not None:
            sampler.stop()


def sliced_block(procs: dict, kind: str, k: int, texts: list[str], quantum: float) -> dict[str, float]:
    """Block `k` sent to both engines at once; they are thawed in turn `quantum` seconds each (the
    one first that the A B, B A, B A, A B order serves first), the other stopped; each engine's time
    is the sum of its turns until its block is answered."""
    done = {n: threading.Event() for n in procs}

    def work(n: str) -> None:
        try:
            block(n, kind, k, texts)
        finally:
            done[n].set()

    workers = [threading.Thread(target=work, args=(n,)) for n in procs]
    for w in workers:
        w.start()
    thawed = dict.fromkeys(procs, 0.0)
    order, turn = ("AB" if k % 4 in (0, 3) else "BA"), 0
    while not all(d.is_set() for d in done.values()):
        n = order[turn % 2]
        turn += 1
        if done[n].is_set():
            continue
        procs[n].send_signal(signal.SIGCONT)
        t = time.perf_counter()
        done[n].wait(quantum)
        procs[n].send_signal(signal.SIGSTOP)
        thawed[n] += time.perf_counter() - t
    for w in workers:
        w.join()
    return thawed


def run_variant(target: str, variant: str, blocks: int, texts: list[str], quantum: float = 0.2) -> list[dict]:
    client_cpus = VARIANTS[variant][2]
    os.sched_setaffinity(0, client_cpus or set(range(os.cpu_count() or 1)))
    procs = {n: start(n, target, variant) for n in "AB"}
    rows = []
    try:
        for n, p in procs.items():
            esn.wait_ready(p, PORTS[n])
            esn.post(texts[8], 1, PORTS[n]), esn.post(texts[7], 2, PORTS[n])  # warm-up
            p.send_signal(signal.SIGSTOP)
        for kind in ("solo", "team"):
            for k in range(blocks):
                order = "AB" if k % 4 in (0, 3) else "BA"
                t = sliced_block(procs, kind, k, texts, quantum) if variant == "slice" else {}
                for n in order if variant != "slice" else ():
                    procs[n].send_signal(signal.SIGCONT)
                    t[n] = block(n, kind, k, texts, sampled=variant == "sampled")
                    procs[n].send_signal(signal.SIGSTOP)
                rows.append({"variant": variant, "kind": kind, "block": k, "A": t["A"], "B": t["B"]})
                print(f"{variant} {kind} {k}: A {t['A']:.2f} s, B {t['B']:.2f} s", flush=True)
    finally:
        for p in procs.values():
            p.send_signal(signal.SIGCONT)
            esn.stop_engine(p)
    return rows


def summary(rows: list[dict]) -> list[dict]:
    out = []
    for variant in dict.fromkeys(r["variant"] for r in rows):
        for kind in ("solo", "team"):
            xs = [r for r in rows if r["variant"] == variant and r["kind"] == kind]
            if len(xs) < 3:
                continue
            lr = [math.log(r["A"] / r["B"]) for r in xs]
            out.append({
                "variant": variant, "kind": kind, "blocks": len(xs),
                "mean_block_s": statistics.mean(r["A"] + r["B"] for r in xs) / 2,
                "log_ratio_mean": statistics.mean(lr), "log_ratio_sd": statistics.stdev(lr),
                "lag1_autocorrelation": statistics.correlation(lr[:-1], lr[1:]) if len(lr) > 3 else None,
            })  # fmt: skip
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", default=str(Path.home() / ".cache/speculator_arena/checkpoints/local-smollm2"))
    ap.add_argument("--variants", default="default,pin1")
    ap.add_argument("--blocks", type=int, default=24)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--quantum", type=float, default=0.2, help="the `slice` variant's turn, seconds")
    ap.add_argument(
        "--max-tokens", type=int, default=esn.MAX_TOKENS[0], help="per request (a GPU serves 32 within a few turns)"
    )
    args = ap.parse_args()
    esn.MAX_TOKENS[0] = args.max_tokens
    names = args.variants.split(",")
    if set(names) - set(VARIANTS):
        sys.exit(f"unknown variants {sorted(set(names) - set(VARIANTS))}; known: {sorted(VARIANTS)}")
    args.out.mkdir(parents=True, exist_ok=True)
    store = args.out / "interleave_noise.json"
    rows = json.loads(store.read_text())["blocks"] if store.exists() else []
    texts = esn.prompts()
    for variant in names:
        rows += run_variant(args.target, variant, args.blocks, texts, args.quantum)
        store.write_text(json.dumps({"blocks": rows, "summary": summary(rows)}, indent=1))
    for line in summary(rows):
        print(json.dumps(line))


if __name__ == "__main__":
    main()
