"""Running the vLLM launchers (engines/vllm-*/launch.sh) for real, to see the command they exec.

Why a recording `vllm` instead of reading the scripts: the flags a launcher passes depend on the
section 3 variables (PREFIX_CACHING, LANGUAGE_MODEL_ONLY, the memory share), so the only faithful
list is the argv of a real run. The launcher runs with the runner's variables; the program it
execs (`vllm` on PATH for the GPU references, `$ARENA_VLLM_VENV/bin/vllm` for the CPU ones) is a
two-line script that writes its argv and the KV setting and exits. The CPU launchers' own Python
(the KV size) runs in a real interpreter.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ENGINES = REPO / "engines"
GPU_REFERENCES = sorted(p.name for p in ENGINES.glob("vllm-*") if not p.name.startswith("vllm-cpu-"))
CPU_ENGINES = sorted(p.name for p in ENGINES.glob("vllm-cpu-*"))
# Flags every vLLM launcher must pass, and why (the runner relies on each).
REQUIRED = {
    "--enable-prompt-tokens-details": "usage.prompt_tokens_details.cached_tokens (the cache-hit figures, calibration)",
    "--served-model-name": "SERVED_NAME",
    "--port": "PORT",
    "--max-model-len": "MAX_MODEL_LEN",
    "--max-num-seqs": "MAX_NUM_SEQS",
}
RECORDER = """#!/bin/sh
printf '%s\\n' "$@" > "$RECORD_ARGV"
printf '%s' "${VLLM_CPU_KVCACHE_SPACE:-}" > "$RECORD_ARGV.kv"
"""


@dataclass
class Launch:
    returncode: int
    argv: list[str]  # what follows `vllm`
    kv_space: str
    stderr: str


def fake_target(root: Path) -> Path:
    """A target directory with the config keys the CPU launchers read (SmolLM2-135M's shape)."""
    t = root / "target"
    t.mkdir(parents=True, exist_ok=True)
    cfg = {"num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3, "hidden_size": 576}
    (t / "config.json").write_text(json.dumps(cfg))
    (t / "model.safetensors").write_bytes(b"\0" * 1024)
    return t


def run_launcher(engine_dir: Path, root: Path, **overrides: str) -> Launch:
    """Run `engine_dir/launch.sh serve` with the runner's variables; the argv it would exec."""
    bin_dir = root / "venv" / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    vllm = bin_dir / "vllm"
    vllm.write_text(RECORDER)
    vllm.chmod(0o755)
    py = bin_dir / "python"
    if not py.exists():
        py.symlink_to(sys.executable)
    target = fake_target(root)
    record = root / "argv.txt"
    record.unlink(missing_ok=True)
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "TARGET": str(target),
        "ARTIFACT": str(target),
        "SPECULATOR": str(root),
        "TOKENIZER": str(target),
        "GENERATION_CONFIG": str(target),
        "SERVED_NAME": "smollm2",
        "PORT": "8123",
        "MAX_MODEL_LEN": "2048",
        "MAX_NUM_SEQS": "4",
        "GPU_MEMORY_UTILIZATION": "0.90",
        "PREFIX_CACHING": "1",
        "ARENA_VLLM_VENV": str(root / "venv"),
        "RECORD_ARGV": str(record),
        **overrides,
    }
    r = subprocess.run(["/bin/bash", str(engine_dir / "launch.sh"), "serve"], env=env, capture_output=True, text=True)
    argv = record.read_text().splitlines() if record.exists() else []
    kv = Path(f"{record}.kv").read_text() if Path(f"{record}.kv").exists() else ""
    return Launch(r.returncode, argv, kv, r.stderr)


def missing_required(argv: list[str]) -> list[str]:
    """The failure messages for the required flags `argv` lacks (empty: none missing)."""
    return [f"{flag} missing: the runner needs it for {why}" for flag, why in REQUIRED.items() if flag not in argv]


def flags(argv: list[str]) -> list[str]:
    return [a.split("=", 1)[0] for a in argv if a.startswith("--")]


def without_flag(engine_dir: Path, flag: str, dest: Path) -> Path:
    """A copy of an engine directory whose launch.sh no longer passes `flag`."""
    dest.mkdir(parents=True, exist_ok=True)
    text = (engine_dir / "launch.sh").read_text()
    assert flag in text
    (dest / "launch.sh").write_text(text.replace(f" {flag}", ""))
    return dest
