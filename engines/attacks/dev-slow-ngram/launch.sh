#!/usr/bin/env bash
# Development engine (speculator_arena.engine.serve). Uses only the variables of protocol section 3
# (TARGET, TOKENIZER, PORT, SERVED_NAME, MAX_MODEL_LEN, MAX_NUM_SEQS, GPU_MEMORY_UTILIZATION,
# PREFIX_CACHING) plus its own DEV_ENGINE_* choices, set here. ARENA_PYTHON picks the interpreter.
set -euo pipefail
if [ "${1:-}" != "serve" ]; then echo "usage: launch.sh serve" >&2; exit 2; fi
# engines/dev-ngram's n-gram speculation, slowed honestly: a fixed 200 ms sleep before every decoding
# step (lossless, every gate passes). Not an attack and never a reference: it exists for the history
# test (tests/runners/test_history.py), a real evaluation that scores below n-gram's interval.
export DEV_ENGINE_SPEC=ngram DEV_ENGINE_SPEC_K=4 DEV_ENGINE_NGRAM_MAX=4 DEV_ENGINE_NGRAM_MIN=2
export DEV_ENGINE_STEP_SLEEP_MS=200
exec "${ARENA_PYTHON:-python3}" -m speculator_arena.engine.serve
