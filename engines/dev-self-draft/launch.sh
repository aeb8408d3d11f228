#!/usr/bin/env bash
# Development engine (speculator_arena.engine.serve). Uses only the variables of protocol section 3
# (TARGET, TOKENIZER, PORT, SERVED_NAME, MAX_MODEL_LEN, MAX_NUM_SEQS, GPU_MEMORY_UTILIZATION,
# PREFIX_CACHING) plus its own DEV_ENGINE_* choices, set here. ARENA_PYTHON picks the interpreter.
set -euo pipefail
if [ "${1:-}" != "serve" ]; then echo "usage: launch.sh serve" >&2; exit 2; fi
# Self-draft: the target's first 24 of 30 layers (early exit through its own norm and LM head) draft 2 tokens, verified losslessly.
export DEV_ENGINE_SPEC=selfdraft DEV_ENGINE_SPEC_K=2 DEV_ENGINE_DRAFT_LAYERS=24
exec "${ARENA_PYTHON:-python3}" -m speculator_arena.engine.serve
