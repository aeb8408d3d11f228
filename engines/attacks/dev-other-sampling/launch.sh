#!/usr/bin/env bash
# Development engine (speculator_arena.engine.serve). Uses only the variables of protocol section 3
# (TARGET, TOKENIZER, PORT, SERVED_NAME, MAX_MODEL_LEN, MAX_NUM_SEQS, GPU_MEMORY_UTILIZATION,
# PREFIX_CACHING) plus its own DEV_ENGINE_* choices, set here. ARENA_PYTHON picks the interpreter.
set -euo pipefail
if [ "${1:-}" != "serve" ]; then echo "usage: launch.sh serve" >&2; exit 2; fi
# ATTACK (protocol section 9), for proving the gates: this engine samples with temperature 1.3, no top_p or top_k, whatever was asked.
# Never a reference; the arena must catch it.
export DEV_ENGINE_SPEC=none
export DEV_ENGINE_ATTACK=other_sampling
exec "${ARENA_PYTHON:-python3}" -m speculator_arena.engine.serve
