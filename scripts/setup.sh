#!/usr/bin/env bash
# Creates .venv and installs the project, the small model, the chat data package and the
# browser used by the board's tests. Safe to run again (it only adds what is missing and puts back
# the locked version of a package that differs).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# The runner starts engines as the unprivileged user `arena-engine` when it runs as root. That
# user must be able to run the venv's interpreter: a pyenv Python under /root (mode 700) is out
# of its reach, so prefer the system's Python of the same version when there is one.
if [ -z "${PYTHON:-}" ] && [ "$(id -u)" = 0 ]; then
  real=$(readlink -f "$(command -v "$PY")")
  want=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  if [[ "$real" == /root/* ]] && [ -x "/usr/bin/python$want" ] && "/usr/bin/python$want" -c 'import venv, ensurepip' 2>/dev/null; then
    PY="/usr/bin/python$want"
  fi
fi
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
. .venv/bin/activate
python -m pip install -q --upgrade pip
# Exactly the locked versions, each file checked against its hash (scripts/lock.sh makes the locks
# from pyproject.toml and requirements-extra.txt; docs/contributors/dependencies.md). torch is the
# CPU wheel of /opt/wheels: PyPI's build of the same version would pull several GB of CUDA.
python -m pip install -q --require-hashes --no-deps -r requirements-lock.txt -r requirements-extra-lock.txt
python -m pip install -q --no-deps -e .
# Debian's packages the tests use, in one apt run where missing: chromium for the board's browser
# tests, etcd for the kubernetes backend's cluster tests (tests/backends/conftest.py starts a real
# control plane with ../shared/tools/kube/up). Each set of tests skips, with the reason, without its own.
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
if [ ${#missing[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null) \
      || echo "warning: ${missing[*]} could not be installed; the tests that need them will be skipped"
  fi
fi
echo "setup done: $(python --version), $(python -c 'import torch; print("torch", torch.__version__)')"
