"""Loading the target (and the self-draft made of its first layers) and running forward passes.

KV caches are transformers' `DynamicCache` objects, one per request. We crop and copy them by
slicing each layer's `keys`/`values` ourselves instead of calling `Cache.crop`, whose
signature changed between transformers 5.17 (the GPU image) and 5.24 (this venv); `layers[i]
.keys/.values` and `DynamicCache(ddp_cache_data=...)` are the same in both.
"""

from __future__ import annotations

import copy
import inspect
import sys

import torch

GIB = 1 << 30


def log(msg: str) -> None:
    print(f"[dev-engine] {msg}", file=sys.stderr, flush=True)


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(name)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("DEV_ENGINE_DEVICE asks for CUDA but no CUDA device is visible")
    return dev


def pick_dtype(name: str, device: torch.device) -> torch.dtype:
    if name == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    table = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if name not in table:
        raise ValueError(f"DEV_ENGINE_DTYPE must be one of {sorted(table)} or auto, got {name!r}")
    return table[name]


def load_target(path: str, device: torch.device, dtype: torch.dtype):
    """The model of a checkpoint directory; a compressed-tensors checkpoint keeps its quantized
    weights quantized in memory (quantized.py), anything else loads through transformers."""
    from transformers import AutoModelForCausalLM

    from speculator_arena.engine.quantized import is_compressed_tensors, load_compressed

    if is_compressed_tensors(path):
        model = load_compressed(path, device, dtype)
    else:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
        model.to(device)
        model.eval()
    release_freed_memory()
    return model


def release_freed_memory() -> None:
    """Hand the loader's freed buffers back to the system (glibc's malloc_trim). Loading converts
    and unpacks tensors; the C allocator keeps what they freed as resident heap, so the engine's
    memory after start-up would count the loader's garbage rather than what it serves with, the
    more so for a checkpoint converted on load (float32 to BF16, packed to int). No-op elsewhere."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        if libc is not None and hasattr(libc, "malloc_trim"):
            libc.malloc_trim(0)
    except OSError:
        pass


@torch.no_grad()
def quantize_weights_int8(model) -> int:
    """The `quantized` attack: round every weight matrix to 8 bits per output channel (symmetric,
    scale = max|w| / 127) and back. The served model is then an approximation of the target,
    which the fidelity gate must catch. Returns how many matrices were rounded."""
    seen, n = set(), 0
    for param in model.parameters():
        if param.dim() != 2 or id(param) in seen:
            continue
        seen.add(id(param))
        w = param.data.float()
        scale = w.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / 127.0
        param.data.copy_((torch.round(w / scale).clamp(-127, 127) * scale).to(param.dtype))
        n += 1
    return n


def build_self_draft(target, layers: int):
    """A draft model made of the target's own embeddings, first `layers` decoder layers, final norm
    and LM head (shared modules, no extra weights). Its KV for a token equals the target's KV in
    those layers, so a drafting round starts from a copy of the target's cache for them."""
    n_layers = target.config.num_hidden_layers
    if not 1 <= layers < n_layers:
        raise ValueError(f"DEV_ENGINE_DRAFT_LAYERS must be in [1, {n_layers - 1}], got {layers}")
    cfg = copy.deepcopy(target.config)
    cfg.num_hidden_layers = layers
    if getattr(cfg, "layer_types", None):
        cfg.layer_types = cfg.layer_types[:layers]
    with torch.device("meta"):
        draft = type(target)(cfg)
    draft.model.embed_tokens = target.model.embed_tokens
    draft.model.layers = torch.nn.ModuleList(list(target.model.layers[:layers]))
    draft.model.norm = target.model.norm
    draft.model.rotary_emb = target.model.rotary_emb
    draft.lm_head = target.lm_head
    leftovers = [n for n, t in list(draft.named_parameters()) + list(draft.named_buffers()) if t.is_meta]
    if leftovers:
        raise RuntimeError(f"self-draft still has unshared tensors: {leftovers[:5]}")
    draft.eval()
    return draft


def new_cache(kv=None):
    from transformers import DynamicCache

    if not kv:
        return DynamicCache()
    try:
        return DynamicCache(ddp_cache_data=list(kv))
    except TypeError:  # a transformers without ddp_cache_data: fill layer by layer
        cache = DynamicCache()
        for i, (k, v) in enumerate(kv):
            cache.update(k, v, i)
        return cache


def cache_len(cache) -> int:
    return int(cache.get_seq_length()) if cache is not None else 0


def cache_kv(cache, length: int | None = None, layers: int | None = None) -> list:
    """Per-layer (keys, values) views, cut to `length` tokens and the first `layers` layers."""
    out = []
    for layer in list(cache.layers)[:layers]:
        k, v = layer.keys, layer.values
        if length is not None:
            k, v = k[..., :length, :], v[..., :length, :]
        out.append((k, v))
    return out


def crop_cache(cache, length: int) -> None:
    for layer in cache.layers:
        if getattr(layer, "keys", None) is not None and layer.keys.numel():
            layer.keys = layer.keys[..., :length, :]
            layer.values = layer.values[..., :length, :]


def forward(model, tokens: list[int], cache, keep: int, device) -> torch.Tensor:
    """Logits [keep, V] of the last `keep` positions after feeding `tokens` on top of `cache`."""
    ids = torch.tensor([tokens], dtype=torch.long, device=device)
    out = model(input_ids=ids, use_cache=True, logits_to_keep=keep, **{_cache_kwarg(model): cache})
    return out.logits[0, -keep:, :]


def _cache_kwarg(model) -> str:
    """transformers 5.24 renamed `past_key_values` to `cache` (the old name warns); 5.17 has only
    the old one. Ask the model's forward which it takes."""
    name = getattr(model, "_dev_engine_cache_kwarg", None)
    if name is None:
        params = inspect.signature(type(model).forward).parameters
        name = "cache" if "cache" in params else "past_key_values"
        model._dev_engine_cache_kwarg = name
    return name


def kv_bytes_per_token(config, dtype: torch.dtype) -> int:
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    elem = torch.tensor([], dtype=dtype).element_size()
    return 2 * config.num_hidden_layers * config.num_key_value_heads * head_dim * elem
