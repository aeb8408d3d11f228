"""How much one start of the development engine differs from another, and one minute from the next,
under placement knobs (issue 31: what is left of the A/A noise under the interleaved pairing).

    python benchmarks/engine_start_noise.py --rounds 4 --variants default,no-aslr,jemalloc,glibc --out DIR

Each round starts the stock development engine (`DEV_ENGINE_SPEC=none`, SmolLM2-135M on CPU, the
machine's threads) once per variant, in an order rotated per round so that a drift of the host
falls on every variant alike. Each start is warmed with two requests, then serves the same fixed
work three times: `solo` (6 requests one at a time), `team` (the same 6 at 3 concurrent), `solo2`
(the solo requests again): 32 tokens each, the arena's sampling, fixed seeds, prefix caching off so
that the repeat is the same work. The spread of `solo` across starts is the start-to-start effect
plus the host's drift; the spread of `solo2/solo` (one start, the same work a minute later) is
the drift alone. A knob that fixes a
start effect narrows the first and leaves the second. Prompts are excerpts of docs/scoring.md.

Needs a quiet machine (nothing else using the CPU): it measures the host, not the code. Writes
`DIR/engine_start_noise.json` (every start; re-running appends) and `DIR/engine_start_noise.png`.
Variants: `default`; `no-aslr` (`setarch -R`: every start's memory at the same addresses);
`omp-passive` (OMP_WAIT_POLICY=PASSIVE); `jemalloc` / `tcmalloc` (LD_PRELOAD, Debian's
libjemalloc2 / libtcmalloc-minimal4); `glibc` (fixed malloc mmap/trim thresholds: no dynamic
threshold, no trimming); `thp` (THP_MEM_ALLOC_ENABLE=1).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PORT = 18555
VARIANTS = {
    "default": ({}, []),
    "no-aslr": ({}, ["setarch", "x86_64", "-R"]),
    "omp-passive": ({"OMP_WAIT_POLICY": "PASSIVE"}, []),
    "jemalloc": ({"LD_PRELOAD": "/lib/x86_64-linux-gnu/libjemalloc.so.2"}, []),
    "tcmalloc": ({"LD_PRELOAD": "/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"}, []),
    "glibc": (
        {"MALLOC_MMAP_THRESHOLD_": "33554432", "MALLOC_TRIM_THRESHOLD_": "1073741824", "MALLOC_TOP_PAD_": "268435456"},
        [],
    ),
    "thp": ({"THP_MEM_ALLOC_ENABLE": "1"}, []),
}
PHASES = ("solo", "team", "solo2")
MAX_TOKENS = [32]  # --max-tokens (a GPU serves 32 tokens too fast for the clock to see the phase)


def prompts() -> list[str]:
    text = " ".join((REPO / "docs" / "scoring.md").read_text().split())
    return [text[i * 1500 : i * 1500 + 1200 + 150 * (i % 4)] for i in range(9)]


def post(prompt: str, seed: int, port: int = PORT) -> int:
    body = {
        "model": "target",
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": MAX_TOKENS[0],
        **{"temperature": 0.7, "top_p": 0.8, "top_k": 20, "seed": seed},
    }
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.loads(r.read())["usage"]["completion_tokens"]


def wait_ready(proc: subprocess.Popen, port: int = PORT) -> None:
    for _ in range(1500):
        if proc.poll() is not None:
            raise RuntimeError(f"the engine exited with {proc.returncode} before it was healthy")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("the engine was not healthy within 5 minutes")


def host_steal() -> tuple[int, int]:
    f = open("/proc/stat").readline().split()
    return int(f[8]), sum(int(x) for x in f[1:])


def start_engine(target: str, port: int, extra: dict[str, str], prefix: list[str]) -> subprocess.Popen:
    """The stock development engine on `port`, prefix caching off, `extra` in its environment and
    `prefix` before its command (setarch, taskset)."""
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    env.update(
        TARGET=target, PORT=str(port), SERVED_NAME="target", MAX_MODEL_LEN="2048", MAX_NUM_SEQS="4",
        PREFIX_CACHING="0", DEV_ENGINE_SPEC="none", TOKENIZERS_PARALLELISM="false", **extra,
    )  # fmt: skip
    return subprocess.Popen(
        prefix + [sys.executable, "-m", "speculator_arena.engine.serve"],
        env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def stop_engine(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def one_start(target: str, variant: str, texts: list[str]) -> dict:
    steal0 = host_steal()
    proc = start_engine(target, PORT, *VARIANTS[variant])
    try:
        wait_ready(proc)
        post(texts[8], 1), post(texts[7], 2)  # warm-up
        row = {"variant": variant}
        t = time.perf_counter()
        row["tokens"] = sum(post(texts[i], 100 + i) for i in range(6))
        row["solo"] = time.perf_counter() - t
        t = time.perf_counter()
        with cf.ThreadPoolExecutor(3) as pool:
            row["tokens"] += sum(pool.map(lambda i: post(texts[i], 200 + i), range(6)))
        row["team"] = time.perf_counter() - t
        t = time.perf_counter()
        row["tokens"] += sum(post(texts[i], 100 + i) for i in range(6))
        row["solo2"] = time.perf_counter() - t
    finally:
        stop_engine(proc)
    steal1 = host_steal()
    row["steal"] = (steal1[0] - steal0[0]) / max(1, steal1[1] - steal0[1])
    return row


def summary(rows: list[dict]) -> list[dict]:
    out = []
    for variant in dict.fromkeys(r["variant"] for r in rows):
        xs = [r for r in rows if r["variant"] == variant]
        line = {"variant": variant, "starts": len(xs)}
        for ph in PHASES:
            v = [x[ph] for x in xs]
            line[f"{ph}_mean_s"] = statistics.mean(v)
            line[f"{ph}_cv_across_starts"] = statistics.pstdev(v) / statistics.mean(v)
        repeat = [x["solo2"] / x["solo"] for x in xs]  # the same work, later in the same start
        line["solo2_over_solo_mean"] = statistics.mean(repeat)
        line["solo2_over_solo_sd"] = statistics.pstdev(repeat)
        line["steal"] = statistics.mean(x["steal"] for x in xs)
        out.append(line)
    return out


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variants = list(dict.fromkeys(r["variant"] for r in rows))
    fig, ax = plt.subplots(figsize=(8, 4))
    for vi, variant in enumerate(variants):
        xs = [r for r in rows if r["variant"] == variant]
        for si, x in enumerate(xs):
            at = vi + (si - len(xs) / 2) * 0.08
            ax.plot([at] * 3, [x[ph] for ph in PHASES], color="0.7", lw=0.8)
            for ph, mark, color in zip(PHASES, ("o", "s", "^"), ("C0", "C1", "C2")):
                ax.scatter([at], [x[ph]], marker=mark, color=color, s=18, label=ph if vi == si == 0 else None)
    ax.set_xticks(range(len(variants)), variants)
    ax.set_ylabel("seconds for the phase's fixed work")
    ax.set_title("Development engine: each start's three phases (a line joins one start)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", default=str(Path.home() / ".cache/speculator_arena/checkpoints/local-smollm2"))
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--variants", default="default,no-aslr,jemalloc,glibc")
    ap.add_argument("--max-tokens", type=int, default=32, help="tokens per reply (32: the embedded task's cap)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    MAX_TOKENS[0] = args.max_tokens
    names = args.variants.split(",")
    unknown = set(names) - set(VARIANTS)
    if unknown:
        sys.exit(f"unknown variants {sorted(unknown)}; known: {sorted(VARIANTS)}")
    args.out.mkdir(parents=True, exist_ok=True)
    store = args.out / "engine_start_noise.json"
    rows = json.loads(store.read_text())["starts"] if store.exists() else []
    texts = prompts()
    for r in range(args.rounds):
        for variant in names[r % len(names) :] + names[: r % len(names)]:
            row = {"round": r, **one_start(args.target, variant, texts)}
            rows.append(row)
            print(f"[{len(rows)}] round {r} {variant}: " + ", ".join(f"{p} {row[p]:.2f} s" for p in PHASES), flush=True)
            store.write_text(json.dumps({"starts": rows, "summary": summary(rows)}, indent=1))
    for line in summary(rows):
        print(json.dumps(line))
    plot(rows, args.out / "engine_start_noise.png")


if __name__ == "__main__":
    main()
