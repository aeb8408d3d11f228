"""What a checkpoint holds, read from its safetensors headers alone (LowBArena's contract).

The runner reads every engine's checkpoint before any engine code runs: one `lowb_tensors` row per
tensor (name, dtype, shape, bytes) and one `lowb_checkpoints` row (what config.json's
`quantization_config` declares, the total bytes, a digest of the directory). Why headers only: a
safetensors file is an 8-byte little-endian header length, a JSON header, then raw bytes; the
header says everything the contract needs, and reading it executes nothing. Why refuse other
weight files: `.bin`/`.pt`/`.pkl` are pickles, and loading a pickle runs code the participant
wrote; a checkpoint that holds one is refused here with a clear error, never opened.

A header that lies (offsets past the file, a size that does not match its shape and dtype,
overlapping tensors, not JSON) raises `MalformedCheckpoint`, an `ArenaError`.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path

from speculator_arena.errors import ArenaError

# Bytes per element of each safetensors dtype (the format's own list).
DTYPE_BYTES = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F8_E8M0": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "I64": 8,
    "U64": 8,
    "F64": 8,
}
SUB_BYTE_DTYPES = {"F4": 0.5, "F6_E2M3": 0.75, "F6_E3M2": 0.75}
# Files that hold weights in a format that runs code when loaded (pickles) or that the contract
# cannot read by header: refused, never opened.
REFUSED_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".joblib", ".npy", ".npz", ".h5", ".gguf")
MAX_HEADER_BYTES = 100 << 20  # safetensors' own limit
MANIFEST = "manifest.json"  # the arena's record beside a sealed checkpoint; not the participant's


class MalformedCheckpoint(ValueError, ArenaError):
    """A checkpoint whose weights the contract cannot read: a refused file type, no safetensors,
    a malformed header or config.json. The message names the file and what is wrong."""


@dataclass(frozen=True)
class TensorInfo:
    file: str
    tensor: str
    dtype: str
    shape: tuple[int, ...]
    bytes: int


@dataclass(frozen=True)
class CheckpointReport:
    tensors: list[TensorInfo]
    checkpoint_sha256: str
    declared_method: str | None
    declared_weights: str | None
    declared_activations: str | None
    declared_kv: str | None
    total_bytes: int

    def tensor_rows(self, evaluation_id: str, engine: str) -> list[dict]:
        """Rows of LOWB_TENSORS."""
        return [
            {
                "evaluation_id": evaluation_id,
                "engine": engine,
                "tensor": t.tensor,
                "dtype": t.dtype,
                "shape": json.dumps(list(t.shape)),
                "bytes": t.bytes,
            }
            for t in self.tensors
        ]

    def checkpoint_row(self, evaluation_id: str, engine: str, device: str) -> dict:
        """The row of LOWB_CHECKPOINTS."""
        return {
            "evaluation_id": evaluation_id,
            "engine": engine,
            "checkpoint_sha256": self.checkpoint_sha256,
            "declared_method": self.declared_method,
            "declared_weights": self.declared_weights,
            "declared_activations": self.declared_activations,
            "declared_kv": self.declared_kv,
            "total_bytes": self.total_bytes,
            "device": device,
        }


def read_header(path: str | Path) -> list[TensorInfo]:
    """The tensors of one safetensors file, from its header; MalformedCheckpoint when it lies."""
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            raise MalformedCheckpoint(f"{path.name}: {size} bytes, too short for a safetensors header")
        (length,) = struct.unpack("<Q", head)
        if length > MAX_HEADER_BYTES or 8 + length > size:
            raise MalformedCheckpoint(f"{path.name}: header length {length} does not fit a {size}-byte file")
        raw = fh.read(length)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MalformedCheckpoint(f"{path.name}: the header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise MalformedCheckpoint(f"{path.name}: the header is not a JSON object")
    data_bytes = size - 8 - length
    out, spans = [], []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        out.append(_tensor(path.name, name, entry, data_bytes, spans))
    spans.sort()
    for (_, a1, an), (b0, _, bn) in zip(spans, spans[1:]):
        if b0 < a1:
            raise MalformedCheckpoint(f"{path.name}: tensors {an!r} and {bn!r} overlap")
    return out


def _tensor(file: str, name: str, entry, data_bytes: int, spans: list) -> TensorInfo:
    if not isinstance(entry, dict):
        raise MalformedCheckpoint(f"{file}: tensor {name!r} has no header object")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    per = DTYPE_BYTES.get(dtype) or SUB_BYTE_DTYPES.get(dtype)
    if per is None:
        raise MalformedCheckpoint(f"{file}: tensor {name!r} has an unknown dtype {dtype!r}")
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise MalformedCheckpoint(f"{file}: tensor {name!r} has a malformed shape {shape!r}")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
        or not 0 <= offsets[0] <= offsets[1] <= data_bytes
    ):
        raise MalformedCheckpoint(
            f"{file}: tensor {name!r} has offsets {offsets!r} outside its {data_bytes} data bytes"
        )
    nbytes = offsets[1] - offsets[0]
    expected = math.ceil(math.prod(shape) * per)
    if nbytes != expected:
        raise MalformedCheckpoint(f"{file}: tensor {name!r} holds {nbytes} bytes; {dtype} {shape} needs {expected}")
    if nbytes:
        spans.append((offsets[0], offsets[1], name))
    return TensorInfo(file, name, dtype, tuple(shape), nbytes)


def files_digest(directory: str | Path) -> str:
    """sha256 of the manifest of the checkpoint's files (name, size, sha256 of each), the arena's
    own manifest.json left out: the same files give the same digest wherever and whenever made."""
    from speculator_arena.checkpoints.seal import sha256_file

    directory = Path(directory)
    entries = []
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        rel = path.relative_to(directory).as_posix()
        if rel == MANIFEST:
            continue
        entries.append([rel, path.stat().st_size, sha256_file(path)])
    return hashlib.sha256(json.dumps(entries, separators=(",", ":")).encode()).hexdigest()


def inspect_checkpoint(directory: str | Path) -> CheckpointReport:
    """Every tensor of the checkpoint's safetensors files and its declared format; refuses a
    directory with pickled or other unreadable weight files, or with no safetensors at all."""
    directory = Path(directory)
    if not directory.is_dir():
        raise MalformedCheckpoint(f"{directory} is not a directory")
    files = sorted(p for p in directory.rglob("*") if p.is_file())
    refused = [p.relative_to(directory).as_posix() for p in files if p.name.lower().endswith(REFUSED_SUFFIXES)]
    if refused:
        raise MalformedCheckpoint(
            f"{directory}: weight files other than safetensors are refused (pickles run code when loaded): "
            + ", ".join(refused[:10])
        )
    weights = [p for p in files if p.suffix == ".safetensors"]
    if not weights:
        raise MalformedCheckpoint(f"{directory}: no *.safetensors file")
    tensors: list[TensorInfo] = []
    seen: dict[str, str] = {}
    for path in weights:
        rel = path.relative_to(directory).as_posix()
        for t in read_header(path):
            if t.tensor in seen:
                raise MalformedCheckpoint(f"tensor {t.tensor!r} is stored twice ({seen[t.tensor]} and {rel})")
            seen[t.tensor] = rel
            tensors.append(TensorInfo(rel, t.tensor, t.dtype, t.shape, t.bytes))
    declared = declared_format(read_config(directory))
    return CheckpointReport(
        tensors=tensors,
        checkpoint_sha256=files_digest(directory),
        total_bytes=sum(t.bytes for t in tensors),
        **declared,
    )


def read_config(directory: Path) -> dict:
    path = directory / "config.json"
    if not path.is_file():
        raise MalformedCheckpoint(f"{directory}: no config.json")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MalformedCheckpoint(f"{path}: not JSON ({exc})") from None
    if not isinstance(config, dict):
        raise MalformedCheckpoint(f"{path}: not a JSON object")
    return config


SHORT_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "half": "fp16", "float": "fp32"}


def _args_label(args) -> str | None:
    """int8, int4, fp8... from compressed-tensors QuantizationArgs (a dict)."""
    if not isinstance(args, dict):
        return None
    bits, kind = args.get("num_bits"), args.get("type", "int")
    return f"{kind}{bits}" if bits is not None else None


def declared_format(config: dict) -> dict:
    """W, A, KV and the method as config.json declares them (shown, not scored). Unquantized
    parts are the model's declared dtype (`dtype` or `torch_dtype`), short (bf16, fp32)."""
    base = config.get("dtype") or config.get("torch_dtype")
    base = SHORT_DTYPES.get(str(base), str(base)) if base else None
    q = config.get("quantization_config")
    if q is None:
        return {"declared_method": None, "declared_weights": base, "declared_activations": base, "declared_kv": base}
    if not isinstance(q, dict):
        raise MalformedCheckpoint("config.json: quantization_config is not an object")
    method = q.get("quant_method")
    weights, acts = set(), set()
    groups = q.get("config_groups")
    if isinstance(groups, dict):
        for group in groups.values():
            if isinstance(group, dict):
                weights.add(_args_label(group.get("weights")) or base)
                acts.add(_args_label(group.get("input_activations")) or base)
    else:  # gptq, awq and most others: `bits`; fp8 and the like name their format
        bits = q.get("bits") or q.get("w_bit") or q.get("num_bits")
        weights.add(f"int{bits}" if bits else (q.get("fmt") or q.get("quant_type") or method))
        acts.add(q.get("activation_scheme") and f"{q.get('fmt', 'fp8')}" or base)
    kv = _args_label(q.get("kv_cache_scheme")) or base
    return {
        "declared_method": str(method) if method is not None else None,
        "declared_weights": "+".join(sorted(str(w) for w in weights)) or base,
        "declared_activations": "+".join(sorted(str(a) for a in acts)) or base,
        "declared_kv": kv,
    }
