"""`python3 -m speculator_arena.engine.serve`: start the development engine from the environment.

Prints a start-up log (model, dtype, device, speculation, attack, cache budget, and an explicit
offload line, which the rules of section 7 read), then serves until SIGTERM or SIGINT.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time


def allocator_huge_pages() -> str:
    """Whether torch's CPU allocator backs large tensors with transparent huge pages: only when
    the operator sets THP_MEM_ALLOC_ENABLE=1 (read once, when torch loads); the runner passes the
    variable to both engines alike (runners/engines.py) and records it in the provenance.

    Why not on by default for every task: in one engine start after another on a 2-core machine,
    huge pages made the first start serve the same requests about 9% faster than the second in
    both A/A runs measured (an order effect, which favours the candidate), where small pages gave
    a spread whose sign changes from run to run. Protocol v4 sets it for the embedded task
    (`placement`), whose mirrored pairing cancels that order effect (docs/benchmarks/aa_noise.md)."""
    return "on" if os.environ.get("THP_MEM_ALLOC_ENABLE") == "1" else "off"


def main() -> int:
    from speculator_arena.engine.config import ConfigError, EngineConfig

    try:
        cfg = EngineConfig.from_env()
    except ConfigError as exc:
        print(f"[dev-engine] configuration error: {exc}", file=sys.stderr)
        return 2
    huge_pages = allocator_huge_pages()
    import torch
    from transformers import AutoTokenizer

    from speculator_arena.engine import model_runner as mr
    from speculator_arena.engine.metrics import EngineMetrics
    from speculator_arena.engine.prefix_cache import PrefixCache
    from speculator_arena.engine.scheduler import Engine
    from speculator_arena.engine.server import EngineServer

    t0 = time.monotonic()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    device = mr.pick_device(cfg.device)
    dtype = mr.pick_dtype(cfg.dtype, device)
    mr.log(f"CPU: {torch.get_num_threads()} threads of {os.cpu_count()} cores; allocator huge pages {huge_pages}")
    mr.log(f"target {cfg.target}; tokenizer {cfg.tokenizer}; served as {cfg.served_name!r} on 127.0.0.1:{cfg.port}")
    tokenizer = AutoTokenizer.from_pretrained(cfg.tokenizer)
    model = mr.load_target(cfg.target, device, dtype)
    n_params = sum(p.numel() for p in model.parameters())
    mr.log(
        f"model {type(model).__name__}, {n_params / 1e6:.1f}M parameters, dtype {str(dtype).replace('torch.', '')}, "
        f"device {device}{' (' + torch.cuda.get_device_name(device) + ')' if device.type == 'cuda' else ''}"
    )
    from speculator_arena.engine.quantized import quantized_summary

    mr.log(quantized_summary(model))
    if cfg.attack == "quantized":
        n = mr.quantize_weights_int8(model)
        mr.log(f"ATTACK quantized: {n} weight matrices rounded to int8 per output channel")
    draft = None
    if cfg.spec == "selfdraft":
        draft = mr.build_self_draft(model, cfg.draft_layers)
        mr.log(
            f"speculation: self-draft with the target's first {cfg.draft_layers} of "
            f"{model.config.num_hidden_layers} layers, {cfg.spec_k} tokens per round"
        )
    elif cfg.spec == "ngram":
        mr.log(f"speculation: n-gram prompt lookup, n {cfg.ngram_max}..{cfg.ngram_min}, {cfg.spec_k} tokens per round")
    elif cfg.spec == "suffix":
        from speculator_arena.engine.suffix_drafter import MAX_STORED

        mr.log(
            f"speculation: suffix decoding, longest suffix match up to {cfg.suffix_max_match} tokens over the "
            f"request's context and this process's last {MAX_STORED} outputs (in memory only), min prob "
            f"{cfg.suffix_min_prob}, at most {cfg.suffix_alpha} x match length and {cfg.spec_k} tokens per round"
        )
    else:
        mr.log("speculation: none")
    if cfg.synthetic_rate is not None:
        mr.log(
            f"rejection sampling: synthetic, each draft accepted with probability {cfg.synthetic_rate} WITHOUT "
            "the target's verification (lossy: replies are no longer the target's)"
        )
    per_token = mr.kv_bytes_per_token(model.config, dtype)
    budget = cache_budget(cfg, device, per_token)
    mr.log(
        f"prefix cache: {'on' if cfg.prefix_caching else 'off'}, budget {budget} tokens "
        f"({budget * per_token / 2**20:.0f} MiB of KV at {per_token} bytes/token), LRU eviction, on {device}"
    )
    mr.log(
        "offload: none (weights and KV cache on "
        + str(device)
        + "; nothing in host memory"
        + (")" if device.type == "cuda" else " because the device is the CPU)")
    )
    hog = None
    if cfg.attack == "hog_memory":
        hog = hog_memory(cfg, device)
    if cfg.attack not in ("none", "quantized", "hog_memory"):
        mr.log(f"ATTACK {cfg.attack} is on")
    inflate = 2.0 if cfg.attack == "inflate_counters" else 1.0
    metrics = EngineMetrics(cfg.served_name, cfg.spec_k if cfg.spec != "none" else 0, inflate)
    engine = Engine(
        cfg, model, tokenizer, device, dtype, PrefixCache(budget if cfg.prefix_caching else 0), metrics, draft
    )
    engine.start()
    server = EngineServer(("127.0.0.1", cfg.port), engine, tokenizer, cfg)

    def _stop(signum, frame):
        mr.log(f"signal {signum}: shutting down")
        engine.stop()
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    mr.log(
        f"ready in {time.monotonic() - t0:.1f} s; max_num_seqs {cfg.max_num_seqs}, max_model_len {cfg.max_model_len}"
    )
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
        del hog
    return 0


def cache_budget(cfg, device, per_token: int) -> int:
    """Prefix-cache budget in tokens. DEV_ENGINE_CACHE_TOKENS wins; on CUDA the KV that fits in
    GPU_MEMORY_UTILIZATION of the device after the weights, less 1 GiB for activations (as vLLM
    sizes its cache); on the CPU four full windows per lane."""
    if cfg.cache_tokens:
        return cfg.cache_tokens
    if device.type == "cuda":
        import torch

        total = torch.cuda.get_device_properties(device).total_memory
        free_budget = cfg.gpu_memory_utilization * total - torch.cuda.memory_reserved(device) - (1 << 30)
        return max(cfg.max_model_len, int(free_budget // per_token))
    return 4 * cfg.max_model_len * cfg.max_num_seqs


def hog_memory(cfg, device):
    """The `hog_memory` attack: hold more of the device than GPU_MEMORY_UTILIZATION + 4 GiB."""
    from speculator_arena.engine import model_runner as mr

    if device.type != "cuda":
        mr.log("ATTACK hog_memory cannot apply on the CPU (no device memory to hold); serving normally")
        return None
    import torch

    free, total = torch.cuda.mem_get_info(device)
    held = total - free
    want = int(cfg.gpu_memory_utilization * total + 5 * (1 << 30) - held)
    want = min(want, free - (512 << 20))
    block = torch.empty(max(want, 0), dtype=torch.uint8, device=device)
    block.fill_(1)
    mr.log(
        f"ATTACK hog_memory: holding {want / 2**30:.1f} GiB more; the device now has "
        f"{(total - torch.cuda.mem_get_info(device)[0]) / 2**30:.1f} of {total / 2**30:.1f} GiB in use"
    )
    return block


if __name__ == "__main__":
    sys.exit(main())
