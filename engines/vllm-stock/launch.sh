#!/usr/bin/env bash
# Production reference for the pinned vLLM image (vllm-openai 0.25.1), protocol section 11.
# Uses only the variables of protocol section 3. BF16 target, prefix caching on (PREFIX_CACHING=1).
set -euo pipefail
if [ "${1:-}" != "serve" ]; then echo "usage: launch.sh serve" >&2; exit 2; fi
args=(serve "$TARGET" --served-model-name "$SERVED_NAME" --tokenizer "$TOKENIZER"
      --host 127.0.0.1 --port "$PORT" --dtype bfloat16
      --max-model-len "$MAX_MODEL_LEN" --max-num-seqs "$MAX_NUM_SEQS"
      --gpu-memory-utilization "$GPU_MEMORY_UTILIZATION" --enable-prompt-tokens-details)
if [ "${PREFIX_CACHING:-1}" = "1" ]; then args+=(--enable-prefix-caching); else args+=(--no-enable-prefix-caching); fi
if [ "${GENERATION_CONFIG:-}" != "" ]; then args+=(--generation-config "$GENERATION_CONFIG"); fi
if [ "${LANGUAGE_MODEL_ONLY:-0}" = "1" ]; then args+=(--limit-mm-per-prompt "{\"image\": 0, \"video\": 0}"); fi
# Stock: no speculation. This is also the paired stock engine of every evaluation.
exec vllm "${args[@]}"
