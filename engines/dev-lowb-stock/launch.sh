#!/usr/bin/env bash
# Development engine (speculator_arena.engine.serve) for LowBArena. Uses only the variables of protocol
# section 3 (TARGET, ARTIFACT, TOKENIZER, PORT, SERVED_NAME, MAX_MODEL_LEN, MAX_NUM_SEQS,
# GPU_MEMORY_UTILIZATION, PREFIX_CACHING) plus its own DEV_ENGINE_* choices, set here. ARENA_PYTHON picks
# the interpreter.
set -euo pipefail
if [ "${1:-}" != "serve" ]; then echo "usage: launch.sh serve" >&2; exit 2; fi
# Stock for LowBArena: no speculation, BF16 compute. Serves the submission's sealed ARTIFACT when one is
# set (a compressed-tensors checkpoint keeps its weights quantized in memory), else the task's TARGET:
# BF16 of the task's model, the reference every LowBArena submission is measured beside.
export DEV_ENGINE_SPEC=none
export DEV_ENGINE_DTYPE=bfloat16
if [ -n "${ARTIFACT:-}" ]; then export TARGET="$ARTIFACT"; fi
exec "${ARENA_PYTHON:-python3}" -m speculator_arena.engine.serve
