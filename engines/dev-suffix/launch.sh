#!/usr/bin/env bash
# Development engine (speculator_arena.engine.serve). Uses only the variables of protocol section 3
# (TARGET, TOKENIZER, PORT, SERVED_NAME, MAX_MODEL_LEN, MAX_NUM_SEQS, GPU_MEMORY_UTILIZATION,
# PREFIX_CACHING) plus its own DEV_ENGINE_* choices, set here. ARENA_PYTHON picks the interpreter.
set -euo pipefail
if [ "${1:-}" != "serve" ]; then echo "usage: launch.sh serve" >&2; exit 2; fi
# Suffix decoding, up to 8 tokens per round (point-mass drafts, verified losslessly): the longest
# suffix match (up to 64 tokens) in the request's context or this process's earlier outputs, drafts
# of at most 1.0 x match length, stopped when the continuation's probability falls below 0.1.
export DEV_ENGINE_SPEC=suffix DEV_ENGINE_SPEC_K=8
export DEV_ENGINE_SUFFIX_MAX_MATCH=64 DEV_ENGINE_SUFFIX_MIN_PROB=0.1 DEV_ENGINE_SUFFIX_ALPHA=1.0
exec "${ARENA_PYTHON:-python3}" -m speculator_arena.engine.serve
