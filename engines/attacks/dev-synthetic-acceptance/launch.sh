#!/usr/bin/env bash
# Development engine (speculator_arena.engine.serve). Uses only the variables of protocol section 3
# (TARGET, TOKENIZER, PORT, SERVED_NAME, MAX_MODEL_LEN, MAX_NUM_SEQS, GPU_MEMORY_UTILIZATION,
# PREFIX_CACHING) plus its own DEV_ENGINE_* choices, set here. ARENA_PYTHON picks the interpreter.
set -euo pipefail
if [ "${1:-}" != "serve" ]; then echo "usage: launch.sh serve" >&2; exit 2; fi
# ATTACK (issue 35): lossy acceptance switched on by configuration, the development engine's
# equivalent of vLLM's speculative config {"rejection_sample_method": "synthetic",
# "synthetic_acceptance_rate"/"_rates"/"_length": ...}: every draft of a weak self-draft (the
# target's first 4 layers) is accepted with probability 0.9 without the target's verification.
# Such knobs simulate an acceptance rate for benchmarking; here they would buy speed by serving
# the draft's text. docs/participants/engine-contract.md names them as breaking the rules; the gates catch it.
export DEV_ENGINE_SPEC=selfdraft DEV_ENGINE_SPEC_K=4 DEV_ENGINE_DRAFT_LAYERS=4
export DEV_ENGINE_REJECTION_SAMPLE_METHOD=synthetic DEV_ENGINE_SYNTHETIC_ACCEPTANCE_RATE=0.9
exec "${ARENA_PYTHON:-python3}" -m speculator_arena.engine.serve
