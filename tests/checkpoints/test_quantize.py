"""LowBArena's reference checkpoints: made from the sealed target, reproducible, read back by header.

Real model, real compressed-tensors; each reference takes a few seconds on the 2-core machine.
"""

from __future__ import annotations

import json
import math
import os
import stat
import struct

import pytest
from safetensors import safe_open

from speculator_arena.checkpoints import prepare_checkpoint, read_manifest
from speculator_arena.checkpoints.inspect_tensors import MalformedCheckpoint, inspect_checkpoint, read_header
from speculator_arena.checkpoints.quantize import (
    PLANTED_EXTRA_TENSOR,
    TARGET_MODULES,
    make_planted_checkpoint,
    make_reference_checkpoint,
)
from speculator_arena.errors import ArenaError

TASK = "lowb-smollm2"
LAYERS = 30
EXPECT = {  # name: (weight tensor suffix, its dtype, K divisor of its last dim, declared weights)
    "rtn-w8": (".weight", "I8", 1, "int8"),
    "rtn-w4-g32": (".weight_packed", "I32", 8, "int4"),
    "rtn-w2-g64": (".weight_packed", "I32", 16, "int2"),
}


@pytest.fixture(scope="module")
def home(tmp_path_factory, smollm2_target):
    return tmp_path_factory.mktemp("lowb_home")


@pytest.fixture(scope="module")
def references(home):
    return {name: make_reference_checkpoint(TASK, name, home) for name in EXPECT}


def test_lowb_task_gets_the_same_sealed_target(home, smollm2_target):
    lowb = prepare_checkpoint(TASK, home=home)
    assert read_manifest(lowb)["files"] == read_manifest(smollm2_target)["files"]


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_reference_tensors_and_declaration(references, smollm2_target, name):
    suffix, dtype, per_word, declared = EXPECT[name]
    report = inspect_checkpoint(references[name])
    by_name = {t.tensor: t for t in report.tensors}
    quantized = [t for t in report.tensors if t.tensor.endswith(f"_proj{suffix}")]
    assert len(quantized) == LAYERS * len(TARGET_MODULES)
    assert {t.dtype for t in quantized} == {dtype}
    down = by_name[f"model.layers.0.mlp.down_proj{suffix}"]
    assert down.shape == (576, 1536 // per_word)
    assert report.declared_method == "compressed-tensors"
    assert (report.declared_weights, report.declared_activations, report.declared_kv) == (declared, "fp32", "fp32")
    assert report.total_bytes == sum(t.bytes for t in report.tensors)
    # the tied embedding and the norms are the target's, byte for byte
    with (
        safe_open(str(references[name] / "model.safetensors"), "pt") as q,
        safe_open(str(smollm2_target / "model.safetensors"), "pt") as t,
    ):
        for key in ("model.embed_tokens.weight", "model.norm.weight", "model.layers.7.input_layernorm.weight"):
            assert q.get_tensor(key).equal(t.get_tensor(key)), key
        assert "lm_head.weight" not in q.keys()
    rows = report.tensor_rows("ev1", "candidate")
    assert rows[0].keys() == {"evaluation_id", "engine", "tensor", "dtype", "shape", "bytes"}
    assert json.loads(next(r for r in rows if r["tensor"] == down.tensor)["shape"]) == list(down.shape)


def test_references_shrink_with_bits(references):
    sizes = {n: inspect_checkpoint(p).total_bytes for n, p in references.items()}
    assert sizes["rtn-w8"] > sizes["rtn-w4-g32"] > sizes["rtn-w2-g64"]


def test_reference_is_sealed_reused_and_reproducible(references, home, tmp_path_factory, smollm2_target):
    path = references["rtn-w4-g32"]
    assert not os.stat(path / "model.safetensors").st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
    made_at = read_manifest(path)["prepared_at"]
    mtime = (path / "model.safetensors").stat().st_mtime_ns
    assert make_reference_checkpoint(TASK, "rtn-w4-g32", home) == path  # reused, not made again
    assert (path / "model.safetensors").stat().st_mtime_ns == mtime
    assert read_manifest(path)["prepared_at"] == made_at
    other = make_reference_checkpoint(TASK, "rtn-w4-g32", tmp_path_factory.mktemp("second_home"))
    assert other != path
    first, second = inspect_checkpoint(path), inspect_checkpoint(other)
    assert first.checkpoint_sha256 == second.checkpoint_sha256 == read_manifest(path)["files_digest"]
    assert first.checkpoint_sha256 != inspect_checkpoint(references["rtn-w8"]).checkpoint_sha256


def test_unknown_reference_is_refused(home):
    with pytest.raises(ArenaError, match="no reference quantization"):
        make_reference_checkpoint(TASK, "rtn-w3", home)


def test_planted_relabelled_bf16_says_int4_and_holds_bf16(home):
    report = inspect_checkpoint(make_planted_checkpoint(TASK, "relabelled-bf16", home))
    assert report.declared_weights == "int4"
    assert {t.dtype for t in report.tensors} == {"BF16"}
    assert report.total_bytes > inspect_checkpoint(make_reference_checkpoint(TASK, "rtn-w8", home)).total_bytes


def test_planted_extra_tensors_carry_over_one_percent(home):
    report = inspect_checkpoint(make_planted_checkpoint(TASK, "extra-tensors", home))
    extra = [t for t in report.tensors if t.tensor == PLANTED_EXTRA_TENSOR]
    assert len(extra) == 1 and extra[0].bytes / report.total_bytes > 0.01
    assert report.declared_weights == "int8"


# ---- inspect_tensors on hand-made files: headers only, malformed ones refused ----------------


def _safetensors(path, header: dict, data: bytes = b"", length: int | None = None) -> None:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw) if length is None else length) + raw + data)


def _dir(tmp_path, header: dict, data: bytes, config: dict | None = None):
    _safetensors(tmp_path / "model.safetensors", header, data)
    (tmp_path / "config.json").write_text(json.dumps(config or {"dtype": "bfloat16"}))
    return tmp_path


def test_inspect_reads_a_hand_made_header(tmp_path):
    header = {"a": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 12]}, "__metadata__": {"format": "pt"}}
    report = inspect_checkpoint(_dir(tmp_path, header, b"\0" * 12))
    assert [(t.tensor, t.dtype, t.shape, t.bytes) for t in report.tensors] == [("a", "BF16", (2, 3), 12)]
    assert (report.declared_method, report.declared_weights) == (None, "bf16")
    assert len(report.checkpoint_sha256) == 64


@pytest.mark.parametrize("suffix", [".bin", ".pt", ".pkl"])
def test_inspect_refuses_pickled_weights(tmp_path, suffix):
    header = {"a": {"dtype": "BF16", "shape": [1], "data_offsets": [0, 2]}}
    directory = _dir(tmp_path, header, b"\0\0")
    (directory / f"pytorch_model{suffix}").write_bytes(b"\x80\x04not opened")
    with pytest.raises(MalformedCheckpoint, match="pickles run code"):
        inspect_checkpoint(directory)


@pytest.mark.parametrize(
    ("header", "data", "length", "match"),
    [
        ({"a": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]}}, b"\0" * 4, None, "outside"),
        ({"a": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8, None, "needs 6"),
        ({"a": {"dtype": "Q9", "shape": [1], "data_offsets": [0, 1]}}, b"\0", None, "unknown dtype"),
        ({"a": {"dtype": "I8", "shape": [-1], "data_offsets": [0, 1]}}, b"\0", None, "malformed shape"),
        (
            {
                "a": {"dtype": "I8", "shape": [4], "data_offsets": [0, 4]},
                "b": {"dtype": "I8", "shape": [4], "data_offsets": [2, 6]},
            },
            b"\0" * 6,
            None,
            "overlap",
        ),
        ({"a": {"dtype": "I8", "shape": [1], "data_offsets": [0, 1]}}, b"\0", 10**12, "does not fit"),
    ],
)
def test_inspect_refuses_malformed_headers(tmp_path, header, data, length, match):
    path = tmp_path / "model.safetensors"
    _safetensors(path, header, data, length)
    with pytest.raises(MalformedCheckpoint, match=match):
        read_header(path)


def test_inspect_refuses_non_json_header_and_missing_weights(tmp_path):
    path = tmp_path / "model.safetensors"
    path.write_bytes(struct.pack("<Q", 5) + b"{nope")
    with pytest.raises(MalformedCheckpoint, match="not JSON"):
        read_header(path)
    path.write_bytes(b"\1\2")
    with pytest.raises(MalformedCheckpoint, match="too short"):
        read_header(path)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(MalformedCheckpoint, match="no \\*.safetensors"):
        inspect_checkpoint(empty)
    assert issubclass(MalformedCheckpoint, ArenaError) and math.isfinite(1.0)
