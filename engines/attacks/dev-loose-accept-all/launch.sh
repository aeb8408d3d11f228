#!/usr/bin/env bash
# Development engine (speculator_arena.engine.serve). Uses only the variables of protocol section 3
# (TARGET, TOKENIZER, PORT, SERVED_NAME, MAX_MODEL_LEN, MAX_NUM_SEQS, GPU_MEMORY_UTILIZATION,
# PREFIX_CACHING) plus its own DEV_ENGINE_* choices, set here. ARENA_PYTHON picks the interpreter.
set -euo pipefail
# ATTACK (protocol section 9), the calibration's negative control for loose acceptance: every
# draft of a weak self-draft (the target's first 4 layers) is accepted ("typical acceptance" taken
# to its end). dev-loose-accept (n-gram drafts, threshold 0.3) is the same mode, but its shift is
# within the noise of a sample of a few dozen replies (the local task's and CI's profiles); this
# one is strong enough for the likelihood and first-choice checks at that size.
export DEV_ENGINE_SPEC=selfdraft DEV_ENGINE_SPEC_K=4 DEV_ENGINE_DRAFT_LAYERS=4
export DEV_ENGINE_ATTACK=loose_accept DEV_ENGINE_LOOSE_THRESHOLD=0.0
exec "${ARENA_PYTHON:-python3}" -m speculator_arena.engine.serve
