#!/usr/bin/env bash
# Development engine (speculator_arena.engine.serve). Uses only the variables of protocol section 3
# (TARGET, TOKENIZER, PORT, SERVED_NAME, MAX_MODEL_LEN, MAX_NUM_SEQS, GPU_MEMORY_UTILIZATION,
# PREFIX_CACHING) plus its own DEV_ENGINE_* choices, set here. ARENA_PYTHON picks the interpreter.
set -euo pipefail
if [ "${1:-}" != "serve" ]; then echo "usage: launch.sh serve" >&2; exit 2; fi
# ATTACK on the gate probes (SCORING.md, "Probe items the candidate does not answer"): this engine
# answers prompt_logprobs with every position under another token id.
# Never a reference; the arena must score it 0 (not void, not pass).
export DEV_ENGINE_SPEC=none
export DEV_ENGINE_ATTACK=garbage_logprob_ids
exec "${ARENA_PYTHON:-python3}" -m speculator_arena.engine.serve
