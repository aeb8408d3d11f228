"""LowBArena's reference quantizations of a task's sealed target, made on this machine, reproducibly.

`make_reference_checkpoint(task_id, name, home)` writes `$ARENA_HOME/checkpoints/lowb/<name>/`
once (later calls reuse it), sealed read-only with a manifest like the target (seal.py):

- `rtn-w8`: int8 weights, one scale per output channel, symmetric; format `int-quantized`
  (each Linear's `weight` stored as I8 beside its `weight_scale`).
- `rtn-w4-g32`: int4, one scale per group of 32 inputs, symmetric; `pack-quantized`
  (`weight_packed` I32, `weight_scale`, `weight_shape`).
- `rtn-w2-g64`: 2-bit, groups of 64, `pack-quantized`. Lossy on purpose: a gate must catch it.

Round-to-nearest (no calibration data): every Linear weight of the decoder layers (q, k, v, o,
gate, up, down) is quantized; the tied embedding / LM head and the norms are kept byte for byte as
in the target. Activations and the KV cache are not quantized (W8A16, W4A16, W2A16).

Why compressed-tensors (PyPI `compressed-tensors`, Apache-2.0, by the vLLM project): it is the
library that writes the checkpoint format vLLM loads for int8 and packed sub-8-bit weights, so a
reference made here is a checkpoint a stock engine could also read, and its scales and rounding
are the library's (`calculate_qparams`, its compressors), not ours. We call it with a scheme and
compute each weight's min/max ourselves: that is what round-to-nearest needs, without
llm-compressor's calibration machinery. Only this module imports it (inside the functions); the
development engine reads the format without it (engine/quantized.py). One caution for vLLM: it
serves an `int-quantized` checkpoint only as W8A8 (dynamic per-token int8 activations declared in
`input_activations`); the development engine computes W8A16, so that is what rtn-w8 declares.

Reproducible: the same target gives the same bytes (the digest recorded in the manifest is of the
files, the manifest's own time stamp excluded), checked by tests/checkpoints/test_quantize.py.

`make_planted_checkpoint(task_id, name, home)` makes the two checkpoints the contract gate must
refuse: `relabelled-bf16` (the target's tensors in BF16 under a config that claims int4
compressed-tensors) and `extra-tensors` (rtn-w8 plus an unrelated tensor of over 1% of its bytes).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from speculator_arena import settings
from speculator_arena.checkpoints.prepare import CheckpointError, _locked, prepare_checkpoint
from speculator_arena.checkpoints.seal import read_manifest, seal, unseal, verify_manifest, write_manifest

LOWB_DIR = "lowb"
# Linear layers quantized: every projection of every decoder layer; nothing else.
TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
PLANTED_EXTRA_TENSOR = "extra.unrelated_table"


@dataclass(frozen=True)
class Recipe:
    """One round-to-nearest scheme: bits, group size (0: one scale per output channel), format."""

    name: str
    bits: int
    group_size: int
    fmt: str  # compressed-tensors format: int-quantized | pack-quantized

    @property
    def declared(self) -> str:
        return f"int{self.bits}" + (f" g{self.group_size}" if self.group_size else " per-channel")


RECIPES = {
    "rtn-w8": Recipe("rtn-w8", 8, 0, "int-quantized"),
    "rtn-w4-g32": Recipe("rtn-w4-g32", 4, 32, "pack-quantized"),
    "rtn-w2-g64": Recipe("rtn-w2-g64", 2, 64, "pack-quantized"),
}
PLANTED = ("relabelled-bf16", "extra-tensors")


def lowb_checkpoint_dir(name: str, home=None) -> Path:
    return settings.arena_home(home) / "checkpoints" / LOWB_DIR / name


def make_reference_checkpoint(task_id: str, name: str, home=None) -> Path:
    """The sealed directory of reference `name` (RECIPES) quantized from `task_id`'s target; made
    on the first call, reused after (a torn or stale directory is made again)."""
    if name not in RECIPES:
        raise CheckpointError(f"no reference quantization {name!r}; known: {sorted(RECIPES)}")
    return _make(task_id, name, home, lambda target, dest: _write_recipe(target, dest, RECIPES[name]))


def make_planted_checkpoint(task_id: str, name: str, home=None) -> Path:
    """A checkpoint the contract gate must refuse (tests and the demo's attack runs)."""
    if name not in PLANTED:
        raise CheckpointError(f"no planted checkpoint {name!r}; known: {list(PLANTED)}")
    writer = _write_relabelled if name == "relabelled-bf16" else _write_extra
    return _make(task_id, name, home, lambda target, dest: writer(task_id, target, dest, home))


def _make(task_id: str, name: str, home, writer) -> Path:
    target = prepare_checkpoint(task_id, home=home)
    final = lowb_checkpoint_dir(name, home)
    target_digest = _target_digest(target)
    if _current(final, target_digest):
        return final
    with _locked(final.parent / f".{name}.lock"):
        if _current(final, target_digest):
            return final
        tmp = final.parent / f".{name}.tmp-{os.getpid()}"
        if tmp.exists():
            unseal(tmp)
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
        try:
            meta = writer(target, tmp)
            _copy_side_files(target, tmp)
            from speculator_arena.checkpoints.inspect_tensors import files_digest

            write_manifest(
                tmp,
                {
                    "task_id": task_id,
                    "name": name,
                    "target": str(target),
                    "target_digest": target_digest,
                    "files_digest": files_digest(tmp),
                    "prepared_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    **meta,
                },
            )
            seal(tmp)
        except BaseException:
            unseal(tmp)
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        if final.exists():
            unseal(final)
            shutil.rmtree(final)
        os.rename(tmp, final)
    return final


def _target_digest(target: Path) -> str:
    """What the reference was made from: the target manifest's file digests (not its time stamp)."""
    import hashlib

    files = (read_manifest(target) or {}).get("files", {})
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


def _current(directory: Path, target_digest: str) -> bool:
    if not directory.is_dir() or verify_manifest(directory):
        return False
    return (read_manifest(directory) or {}).get("target_digest") == target_digest


def _copy_side_files(target: Path, dest: Path) -> None:
    """Tokenizer, chat template, generation config and licence, as in the target."""
    for path in sorted(target.iterdir()):
        if path.is_file() and path.suffix != ".safetensors" and path.name not in ("config.json", "manifest.json"):
            shutil.copyfile(path, dest / path.name)


def _load_target(target: Path):
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(target), dtype=torch.float32).eval()


def _quiet_library() -> None:
    from compressed_tensors.logger import logger

    logger.disable("compressed_tensors")  # one format warning per layer for W8A16 int-quantized


def quantize_model(model, recipe: Recipe) -> dict:
    """Quantize `model`'s decoder Linear weights in place with compressed-tensors (round to nearest)
    and return the `quantization_config` for config.json."""
    import torch
    from compressed_tensors.compressors import ModelCompressor
    from compressed_tensors.quantization import (
        QuantizationArgs,
        QuantizationConfig,
        QuantizationScheme,
        apply_quantization_config,
    )
    from compressed_tensors.quantization.utils import calculate_qparams

    _quiet_library()
    args = QuantizationArgs(
        num_bits=recipe.bits,
        type="int",
        symmetric=True,
        strategy="group" if recipe.group_size else "channel",
        group_size=recipe.group_size or None,
    )
    targets = ["re:.*layers\\.\\d+\\.(self_attn|mlp)\\.(" + "|".join(TARGET_MODULES) + ")$"]
    scheme = QuantizationScheme(targets=targets, weights=args, format=recipe.fmt)
    config = QuantizationConfig(
        config_groups={"group_0": scheme}, ignore=["lm_head"], quantization_status="frozen", format=recipe.fmt
    )
    apply_quantization_config(model, config, show_progress=False)
    quantized = 0
    with torch.no_grad():
        for _, module in model.named_modules():
            if getattr(module, "quantization_scheme", None) is None:
                continue
            w = module.weight.data
            view = w.reshape(w.shape[0], -1, recipe.group_size) if recipe.group_size else w.reshape(w.shape[0], 1, -1)
            scale, _ = calculate_qparams(view.amin(-1), view.amax(-1), args)
            module.weight_scale.data.copy_(scale.reshape(module.weight_scale.shape))
            quantized += 1
    expected = model.config.num_hidden_layers * len(TARGET_MODULES)
    if quantized != expected:
        raise CheckpointError(f"{recipe.name}: {quantized} Linear layers matched, expected {expected}")
    compressor = ModelCompressor.from_pretrained_model(model, quantization_format=recipe.fmt)
    compressor.compress_model(model)
    compressor.remove_decompression_hook(model)
    import compressed_tensors

    qconfig = compressor.quantization_config.model_dump(exclude=["quant_method"])
    return {
        "version": compressed_tensors.__version__,
        "quant_method": "compressed-tensors",
        **qconfig,
    }


def _save(model, dest: Path, quantization_config: dict | None, dtype_name: str = "float32") -> None:
    """model.safetensors under save_pretrained's names (tied embedding once) and config.json."""
    from safetensors.torch import save_file

    from speculator_arena.checkpoints.layout import pretrained_state_dict

    state = pretrained_state_dict(model)
    state = {k: v for k, v in state.items() if not k.endswith("weight_zero_point")}
    save_file(dict(sorted(state.items())), str(dest / "model.safetensors"), metadata={"format": "pt"})
    config = model.config.to_dict()
    for key in ("quantization_config", "_name_or_path", "_model_name_or_path", "transformers_version"):
        config.pop(key, None)
    config["dtype"] = dtype_name
    if quantization_config is not None:
        config["quantization_config"] = quantization_config
    (dest / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _write_recipe(target: Path, dest: Path, recipe: Recipe) -> dict:
    import compressed_tensors

    model = _load_target(target)
    qconfig = quantize_model(model, recipe)
    _save(model, dest, qconfig)
    return {
        "recipe": recipe.name,
        "method": f"round-to-nearest {recipe.declared}, symmetric, {recipe.fmt}",
        "tool": f"compressed-tensors {compressed_tensors.__version__} (Apache-2.0)",
    }


def _write_relabelled(task_id: str, target: Path, dest: Path, home) -> dict:
    """The target's tensors in BF16 under the int4 reference's quantization_config: a BF16 model
    that says it is int4. Nothing in it is quantized; its bytes show it."""
    import torch

    w4 = make_reference_checkpoint(task_id, "rtn-w4-g32", home)
    claimed = json.loads((w4 / "config.json").read_text(encoding="utf-8"))["quantization_config"]
    model = _load_target(target).to(torch.bfloat16)
    _save(model, dest, claimed, dtype_name="bfloat16")
    return {"planted": "relabelled-bf16", "note": "BF16 weights under a config claiming int4 compressed-tensors"}


def _write_extra(task_id: str, target: Path, dest: Path, home) -> dict:
    """rtn-w8 plus an unrelated tensor holding 2% of the checkpoint's bytes (a second model, a
    lookup table: anything that is not the task's model), in a file of its own."""
    import torch
    from safetensors.torch import save_file

    w8 = make_reference_checkpoint(task_id, "rtn-w8", home)
    shutil.copyfile(w8 / "model.safetensors", dest / "model.safetensors")
    shutil.copyfile(w8 / "config.json", dest / "config.json")
    size = (dest / "model.safetensors").stat().st_size
    gen = torch.Generator().manual_seed(28)
    extra = torch.randn(int(size * 0.02) // 2, generator=gen).to(torch.bfloat16)
    save_file({PLANTED_EXTRA_TENSOR: extra}, str(dest / "extra.safetensors"), metadata={"format": "pt"})
    return {"planted": "extra-tensors", "note": f"rtn-w8 plus {PLANTED_EXTRA_TENSOR} ({extra.numel() * 2:,} bytes)"}
