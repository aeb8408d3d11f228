#!/usr/bin/env bash
# The README's test command (it lists the 30 slowest steps at the end). ARENA_TEST_PROFILE=full runs the
# long end-to-end evaluations too.
set -euo pipefail
cd "$(dirname "$0")/.."
. .venv/bin/activate
exec python -m pytest -q -p no:cacheprovider --durations=30 "$@"
