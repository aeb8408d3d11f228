"""Serving a compressed-tensors checkpoint with its weights kept quantized in memory.

Why our own loader: transformers' compressed-tensors support decompresses every weight to the
model's dtype on load, so the engine would hold BF16 weights and its memory would say nothing of
the quantization. Here each quantized Linear becomes a `QuantLinear` holding the checkpoint's
integers, and the engine's resident memory is really smaller. The engine needs no
compressed-tensors package (the GPU image has none): both layouts are read here.

- `int-quantized` (`weight` I8 + `weight_scale`) and `pack-quantized` (`weight_packed` I32, the
  values of `num_bits` bits packed 32 / bits to a word from the lowest bits up, offset by
  2^(bits-1), + `weight_scale` + `weight_shape`); symmetric schemes, per channel or per group.
- Decode steps (a few rows) use torch's CPU weight-only kernels, faster than BF16 there because
  they read fewer bytes: `_weight_int8pack_mm` for int8 per channel, `_weight_int4pack_mm_for_cpu`
  for 4-bit groups, and for 2-bit groups too (every 2-bit value is an int4 value: the same
  products, served from 4-bit storage). Measured on this 2-core AVX512 CPU, 1536x576, one row:
  BF16 236 us, int8 95 us, int4 86 us. With many rows (a prefill chunk) those kernels are ~10x
  slower than BF16's GEMM, so a chunk dequantizes the layer's weight to BF16 on the fly (about
  0.6 ms a matrix) and multiplies once.
- Without a kernel (another device, an unsupported group or shape), weights stay as int8 values
  and every call dequantizes them: slower, never larger.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch

KERNEL_MAX_ROWS = 8  # up to this many rows a weight-only kernel beats dequantize + BF16 GEMM
INT4_GROUPS = (32, 64, 128, 256)


def is_compressed_tensors(path: str | Path) -> bool:
    try:
        config = json.loads((Path(path) / "config.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return False
    q = config.get("quantization_config")
    return isinstance(q, dict) and q.get("quant_method") == "compressed-tensors"


def unpack_int32(packed: torch.Tensor, bits: int, shape: tuple[int, int]) -> torch.Tensor:
    """compressed-tensors' `pack_to_int32` undone: int8 values in [-2^(bits-1), 2^(bits-1))."""
    rows, cols = shape
    per_word = 32 // bits
    if 32 % bits:
        raise ValueError(f"{bits}-bit values do not tile a 32-bit word; only 2, 4 and 8 bits are read")
    shifts = torch.arange(per_word, dtype=torch.int32) * bits
    vals = (packed.to(torch.int32).unsqueeze(-1) >> shifts) & ((1 << bits) - 1)
    vals = vals.reshape(rows, -1)[:, :cols]
    return (vals - (1 << (bits - 1))).to(torch.int8)


def _int4_kernel_ok() -> bool:
    aten = torch.ops.aten
    return hasattr(aten, "_convert_weight_to_int4pack_for_cpu") and hasattr(aten, "_weight_int4pack_mm_for_cpu")


def _int4_unpack(packed: torch.Tensor, n: int, k: int) -> torch.Tensor:
    """The int4 values (0..15) back out of `_convert_weight_to_int4pack_for_cpu`'s layout: blocks
    of 64 output rows, each [K, 32] bytes whose low nibble is row j and high nibble row j + 32
    (checked against the kernel at load, `_int4_layout_ok`)."""
    p = packed.view(n // 64, k, 32)
    both = torch.stack([p & 0xF, p >> 4], dim=1)  # [B, 2, K, 32]
    return both.permute(0, 1, 3, 2).reshape(n, k)


def _int4_layout_ok(n: int, k: int) -> bool:
    if n % 64 or k % 2:
        return False
    gen = torch.Generator().manual_seed(n * 7919 + k)
    q = torch.randint(0, 16, (n, k), dtype=torch.int32, generator=gen)
    try:
        packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 2)
        return torch.equal(_int4_unpack(packed, n, k).to(torch.int32), q)
    except (RuntimeError, ValueError):
        return False


class QuantLinear(torch.nn.Module):
    """A Linear whose weight stays quantized: int8 values or a kernel's packed form, with scales."""

    def __init__(self, q: torch.Tensor, scale: torch.Tensor, bits: int, group: int, bias, dtype, device):
        super().__init__()
        n, k = q.shape
        self.in_features, self.out_features, self.bits, self.dtype = k, n, bits, dtype
        self.group = group or k  # per channel: one group of every input
        scale = scale.reshape(n, -1).to(torch.float32)
        self.mode = "dequant"
        if (
            device.type == "cpu"
            and bits == 8
            and scale.shape[1] == 1
            and hasattr(torch.ops.aten, "_weight_int8pack_mm")
        ):
            self.mode = "int8pack"
        elif device.type == "cpu" and bits <= 4 and self.group in INT4_GROUPS and k % self.group == 0:
            if _int4_kernel_ok() and _LAYOUTS.setdefault((n, k), _int4_layout_ok(n, k)):
                self.mode = "int4pack"
        if self.mode == "int4pack":
            packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu((q.to(torch.int32) + 8).contiguous(), 2)
            self.register_buffer("qweight", packed.to(device))
            sz = torch.stack([scale.t(), torch.zeros_like(scale.t())], dim=-1)  # [K/g, N, 2]: scale, zero
            self.register_buffer("scales_zeros", sz.to(dtype).contiguous().to(device))
        else:
            self.register_buffer("qweight", q.to(torch.int8).contiguous().to(device))
        self.register_buffer("scale", scale.to(dtype).contiguous().to(device))
        self.register_buffer("bias", None if bias is None else bias.to(dtype).to(device))

    @property
    def weight_bytes(self) -> int:
        extra = self.scales_zeros.numel() * self.scales_zeros.element_size() if self.mode == "int4pack" else 0
        return self.qweight.numel() * self.qweight.element_size() + self.scale.numel() * 2 + extra

    def int_values(self) -> torch.Tensor:
        """The weight's integers, [N, K] int8, whatever the storage."""
        if self.mode == "int4pack":
            return (_int4_unpack(self.qweight, self.out_features, self.in_features).to(torch.int16) - 8).to(torch.int8)
        return self.qweight

    def dequantized(self) -> torch.Tensor:
        n, k, g = self.out_features, self.in_features, self.group
        w = self.int_values().to(self.dtype).view(n, k // g, g) * self.scale.view(n, k // g, 1)
        return w.view(n, k)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x2 = x.reshape(-1, shape[-1]).to(self.dtype)
        if x2.shape[0] <= KERNEL_MAX_ROWS and self.mode == "int8pack":
            out = torch.ops.aten._weight_int8pack_mm(x2.contiguous(), self.qweight, self.scale.view(-1))
        elif x2.shape[0] <= KERNEL_MAX_ROWS and self.mode == "int4pack":
            out = torch.ops.aten._weight_int4pack_mm_for_cpu(
                x2.contiguous(), self.qweight, self.group, self.scales_zeros
            )
        else:
            out = torch.nn.functional.linear(x2, self.dequantized())
        if self.bias is not None:
            out = out + self.bias
        return out.reshape(*shape[:-1], self.out_features)


_LAYOUTS: dict[tuple[int, int], bool] = {}


def _matches(name: str, module: torch.nn.Module, targets: list[str]) -> bool:
    for t in targets:
        if t.startswith("re:"):
            if re.match(t[3:], name):
                return True
        elif t == type(module).__name__ or t == name or (t == "Linear" and isinstance(module, torch.nn.Linear)):
            return True
    return False


def _schemes(qconfig: dict) -> list[tuple[list[str], dict]]:
    groups = qconfig.get("config_groups") or {}
    out = []
    for group in groups.values():
        w = group.get("weights") or {}
        if group.get("input_activations") or not w:
            raise ValueError("the development engine serves weight-only compressed-tensors schemes (W8A16, W4A16...)")
        if w.get("type", "int") != "int" or not w.get("symmetric", True):
            raise ValueError(f"only symmetric int weights are served, got {w}")
        out.append((list(group.get("targets") or []), w))
    return out


def load_compressed(path: str, device: torch.device, dtype: torch.dtype):
    """The model of a compressed-tensors checkpoint, quantized Linears kept quantized."""
    from safetensors import safe_open
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(path)
    qconfig = config.quantization_config
    qconfig = qconfig if isinstance(qconfig, dict) else qconfig.to_dict()
    schemes = _schemes(qconfig)
    ignore = list(qconfig.get("ignore") or [])
    del config.quantization_config
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    handles = [safe_open(str(f), "pt") for f in sorted(Path(path).glob("*.safetensors"))]
    where = {key: h for h in handles for key in h.keys()}

    def take(key: str) -> torch.Tensor:
        # A copy: a tensor still backed by the file's mapping would keep every page read from it
        # (the float32 embedding among them) resident for the engine's life.
        return where.pop(key).get_tensor(key).clone()

    for name, module in list(model.named_modules()):
        if not isinstance(module, torch.nn.Linear) or _matches(name, module, ignore):
            continue
        scheme = next((w for targets, w in schemes if _matches(name, module, targets)), None)
        if scheme is None or f"{name}.weight_scale" not in where:
            continue
        bits, group = int(scheme["num_bits"]), int(scheme.get("group_size") or 0)
        if f"{name}.weight_packed" in where:
            shape = tuple(int(v) for v in take(f"{name}.weight_shape").tolist())
            q = unpack_int32(take(f"{name}.weight_packed"), bits, shape)
        else:
            q = take(f"{name}.weight")
            if q.dtype != torch.int8:
                raise ValueError(f"{name}.weight is {q.dtype}; an int-quantized weight is int8")
        bias = take(f"{name}.bias") if f"{name}.bias" in where else None
        parent, _, child = name.rpartition(".")
        quant = QuantLinear(q, take(f"{name}.weight_scale"), bits, group, bias, dtype, device)
        setattr(model.get_submodule(parent), child, quant)
        del q
    state = {key: take(key).to(dtype) for key in list(where)}
    missing, unexpected = model.load_state_dict(state, strict=False, assign=True)
    del state, handles
    model.tie_weights()
    _rebuild_meta_buffers(model, config)
    left = [n for n, t in list(model.named_parameters()) + list(model.named_buffers()) if t.is_meta]
    if left or unexpected:
        raise ValueError(f"checkpoint does not fit the model: unloaded {left[:5]}, unexpected {unexpected[:5]}")
    model.to(device)
    model.eval()
    return model


def _rebuild_meta_buffers(model, config) -> None:
    """Rotary embeddings keep non-persistent buffers (inv_freq) that a meta-built model never
    fills from a checkpoint; they are computed from the config, so build the module again."""
    for name, module in list(model.named_modules()):
        if any(b.is_meta for b in module.buffers(recurse=False)) and type(module).__name__.endswith("RotaryEmbedding"):
            parent, _, child = name.rpartition(".")
            with torch.device("cpu"):
                fresh = type(module)(config=getattr(module, "config", config))
            setattr(model.get_submodule(parent) if parent else model, child, fresh)


def quantized_summary(model) -> str:
    """One log line: how many Linears are kept quantized, in which storage, and their bytes."""
    layers = [m for m in model.modules() if isinstance(m, QuantLinear)]
    if not layers:
        return "weights: not quantized"
    modes: dict[str, int] = {}
    for m in layers:
        key = f"int{m.bits} {m.mode}"
        modes[key] = modes.get(key, 0) + 1
    held = sum(m.weight_bytes for m in layers)
    return (
        f"weights: {len(layers)} Linear layers kept quantized ({', '.join(f'{v} {k}' for k, v in sorted(modes.items()))}),"
        f" {held / 2**20:.1f} MiB; compute in {str(layers[0].dtype).replace('torch.', '')}"
    )
