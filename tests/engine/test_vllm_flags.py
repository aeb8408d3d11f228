"""The vLLM launchers pass what the runner relies on, in flags the installed vLLM accepts.

The first tests need no vLLM (they run the launchers with a recording `vllm`: vllm_launchers.py)
and run in CI. The last one parses every launcher's real argv with the installed vLLM's own
`vllm serve` argument parser (the venv of scripts/setup_vllm_cpu.sh, ARENA_VLLM_VENV); it is
skipped, with the reason, where that venv is absent. The GPU references are pinned to vLLM 0.25.1
(protocol section 11) and parsed here by the CPU build's 0.32.0: a flag that both know.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path

import pytest
from vllm_launchers import CPU_ENGINES, ENGINES, GPU_REFERENCES, flags, missing_required, run_launcher, without_flag

from speculator_arena import settings

ALL = GPU_REFERENCES + CPU_ENGINES
PARSE = Path(__file__).with_name("vllm_parse_serve.py")


def test_the_launchers_are_there():
    assert {"vllm-stock", "vllm-ngram"} <= set(GPU_REFERENCES)
    assert CPU_ENGINES == ["vllm-cpu-ngram", "vllm-cpu-stock"]


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("prefix_caching", ["1", "0"])
def test_launcher_passes_what_the_runner_needs(name, prefix_caching, tmp_path):
    r = run_launcher(ENGINES / name, tmp_path, PREFIX_CACHING=prefix_caching)
    assert r.returncode == 0, r.stderr
    assert r.argv[:2] == ["serve", str(tmp_path / "target")]
    assert missing_required(r.argv) == []
    assert r.argv[r.argv.index("--port") + 1] == "8123"
    assert r.argv[r.argv.index("--host") + 1] == "127.0.0.1"
    want = "--enable-prefix-caching" if prefix_caching == "1" else "--no-enable-prefix-caching"
    assert want in r.argv and len({"--enable-prefix-caching", "--no-enable-prefix-caching"} & set(r.argv)) == 1
    spec = json.loads(r.argv[r.argv.index("--speculative-config") + 1]) if "--speculative-config" in r.argv else None
    if name.endswith("ngram"):
        assert spec == {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}
    if name.endswith("stock"):
        assert spec is None


@pytest.mark.parametrize("name", CPU_ENGINES)
def test_cpu_launcher_choices(name, tmp_path):
    r = run_launcher(ENGINES / name, tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.argv[r.argv.index("--dtype") + 1] == "float32"
    assert "--enforce-eager" in r.argv
    # On CPU --gpu-memory-utilization is a share of host RAM: the arena's 0.90 must not reach it.
    assert "--gpu-memory-utilization" not in r.argv
    # KV: 2 x 30 layers x 3 KV heads x 64 x 4 bytes = 46,080 bytes a token, for MAX_NUM_SEQS x
    # MAX_MODEL_LEN tokens, x 1.25, rounded up; capped by the share of RAM less 3 GiB; at least 1.
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    assert r.kv_space == "1"  # 2048 x 4 tokens: 0.35 GiB
    big = run_launcher(ENGINES / name, tmp_path, MAX_MODEL_LEN="32768", MAX_NUM_SEQS="8")  # 11.25 GiB
    assert int(big.kv_space) == max(1, min(15, math.floor(0.90 * ram - 2 * 1024 / 2**30 - 3)))
    starved = run_launcher(ENGINES / name, tmp_path, MAX_MODEL_LEN="32768", GPU_MEMORY_UTILIZATION="0.01")
    assert starved.kv_space == "1"  # the share's negative remainder is never passed on


@pytest.mark.parametrize("name", CPU_ENGINES)
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "auto"])
def test_cpu_launcher_refuses_other_dtypes(name, dtype, tmp_path):
    r = run_launcher(ENGINES / name, tmp_path, ARENA_VLLM_DTYPE=dtype)
    assert r.returncode == 2 and r.argv == []
    assert f"dtype {dtype} refused" in r.stderr and "float32" in r.stderr


def test_cpu_launcher_without_the_venv_says_so(tmp_path):
    r = run_launcher(ENGINES / "vllm-cpu-stock", tmp_path, ARENA_VLLM_VENV=str(tmp_path / "nowhere"))
    assert r.returncode == 2 and "no vLLM CPU build at" in r.stderr and "setup_vllm_cpu.sh" in r.stderr


@pytest.mark.parametrize("name", ["vllm-stock", "vllm-cpu-ngram"])
def test_a_launcher_dropping_prompt_tokens_details_is_caught(name, tmp_path):
    broken = without_flag(ENGINES / name, "--enable-prompt-tokens-details", tmp_path / "broken")
    r = run_launcher(broken, tmp_path)
    assert r.returncode == 0, r.stderr
    assert missing_required(r.argv) == [
        "--enable-prompt-tokens-details missing: the runner needs it for "
        "usage.prompt_tokens_details.cached_tokens (the cache-hit figures, calibration)"
    ]


def _vllm_python() -> Path:
    py = Path(settings.get("ARENA_VLLM_VENV")) / "bin" / "python"
    if not py.exists():
        pytest.skip(f"no vLLM CPU build at {py.parent.parent} (scripts/setup_vllm_cpu.sh; ARENA_VLLM_VENV)")
    return py


@pytest.fixture(scope="module")
def vllm_parse():
    """Parse argv lists with the installed vLLM's own `vllm serve` parser (one process for all)."""
    py = _vllm_python()

    def parse(argvs: dict[str, list[str]]) -> dict[str, str | None]:
        r = subprocess.run([str(py), str(PARSE)], input=json.dumps(argvs), capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        return json.loads(r.stdout.splitlines()[-1])

    return parse


def test_every_launcher_flag_exists_in_the_installed_vllm(vllm_parse, tmp_path):
    argvs = {}
    for name in ALL:
        for pc in ("1", "0"):
            for lmo in ("0", "1"):
                root = tmp_path / f"{name}-{pc}-{lmo}"
                r = run_launcher(ENGINES / name, root, PREFIX_CACHING=pc, LANGUAGE_MODEL_ONLY=lmo)
                assert r.returncode == 0, r.stderr
                argvs[f"{name} PREFIX_CACHING={pc} LANGUAGE_MODEL_ONLY={lmo}"] = r.argv
    errors = vllm_parse(argvs)
    assert {k: v for k, v in errors.items() if v} == {}
    assert set(errors) == set(argvs)
    # The parser is a real one: an unknown flag is an error, with vLLM's own message.
    bad = vllm_parse({"typo": ["serve", "m", "--enable-prompt-token-details"]})
    assert bad["typo"] and "enable-prompt-token-details" in bad["typo"]
    used = {f for argv in argvs.values() for f in flags(argv)}
    assert "--enable-prompt-tokens-details" in used and "--speculative-config" in used


def test_the_plugin_wheel_is_its_source():
    """engines/vllm-cpu-ngram/plugin/ holds the wheel built from plugin-src/: the same module, its
    entry point in vLLM's plugin group (a wheel left stale after an edit of the source fails here)."""
    import zipfile

    root = ENGINES / "vllm-cpu-ngram"
    (wheel,) = sorted((root / "plugin").iterdir())
    assert wheel.suffix == ".whl"
    with zipfile.ZipFile(wheel) as z:
        module = z.read("vllm_arena_cpu_fix/__init__.py").decode()
        entry_points = next(z.read(n).decode() for n in z.namelist() if n.endswith(".dist-info/entry_points.txt"))
    assert module == (root / "plugin-src" / "vllm_arena_cpu_fix" / "__init__.py").read_text()
    assert "[vllm.general_plugins]" in entry_points and "vllm_arena_cpu_fix:register" in entry_points
