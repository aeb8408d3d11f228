#!/usr/bin/env bash
# Development engine (speculator_arena.engine.serve) for LowBArena. Uses only the variables of protocol
# section 3 plus its own DEV_ENGINE_* choices, set here. ARENA_PYTHON picks the interpreter.
set -euo pipefail
if [ "${1:-}" != "serve" ]; then echo "usage: launch.sh serve" >&2; exit 2; fi
# ATTACK (LowBArena), for proving the gates: this engine never stops at EOS: every answer runs to max_tokens (length gate, dL).
# Never a reference; the arena must catch it.
export DEV_ENGINE_SPEC=none
export DEV_ENGINE_DTYPE=bfloat16
export DEV_ENGINE_ATTACK=lowb_long
if [ -n "${ARTIFACT:-}" ]; then export TARGET="$ARTIFACT"; fi
exec "${ARENA_PYTHON:-python3}" -m speculator_arena.engine.serve
