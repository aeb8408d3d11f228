"""The raw tables' schemas. Documented column by column in docs/warehouse.md.

Every table is keyed by `evaluation_id` and stored as Parquet under
`$ARENA_HOME/raw/<table>/evaluation_id=<id>/<part>.parquet` (hive partitioning, so DuckDB
reads the id from the path and one evaluation's rows can be replaced or dropped alone).
Times are Unix epoch seconds as float64 from one clock (the runner's `time.time()`), so
differences between them are durations.
"""

from __future__ import annotations

import pyarrow as pa

F64 = pa.float64()
I64 = pa.int64()
STR = pa.string()
BOOL = pa.bool_()

# One row per evaluation (rewritten as its status changes; the only mutable raw table).
EVALUATIONS = pa.schema(
    [
        ("evaluation_id", STR),
        ("task_id", STR),
        ("split", STR),  # dev | test
        ("protocol_version", I64),  # the version it was run under (scores can use any)
        ("submission_id", STR),
        ("account_id", STR),
        ("is_reference", BOOL),
        ("label", STR),  # shown name, e.g. "dev-ngram-4"
        ("solution_kind", STR),  # ngram | suffix | draft | eagle3 | mtp | other | none
        ("status", STR),  # queued | running | measured | void | failed
        ("void_reason", STR),  # why void, or null
        ("failure_reason", STR),  # why failed (candidate did not start, died, ...), or null
        ("created_at", F64),
        ("updated_at", F64),
        ("provenance", STR),  # JSON: engine dir digest, speculator uri+revision, host, code commit, runner user...
    ]
)

# One row per timed pass per engine.
PASSES = pa.schema(
    [
        ("evaluation_id", STR),
        ("pass_id", STR),  # "<workload>-<pass_index>", the same for both engines
        ("engine", STR),  # candidate | stock
        ("workload", STR),  # solo | team | busy
        ("pass_index", I64),
        ("lanes", I64),
        ("interleave", I64),
        ("started_at", F64),
        ("ends_at", F64),  # started_at + pass seconds: no request is sent after it
        ("grace_ends_at", F64),
        ("finished_at", F64),
        ("status", STR),  # complete | aborted
        ("error", STR),
        ("memory_status", STR),  # sampled | unavailable
        ("memory_note", STR),  # e.g. "no NVIDIA device (NVML: ...)" when unavailable
        ("device_total_bytes", I64),  # null when unavailable
        ("gpu_memory_utilization", F64),
        # The interleaved pairing (v8 on): CPU seconds the serving engine's control group used
        # during the pass, and the other engine's, frozen meanwhile (rules/idle.py); null under
        # the pairings that run one engine at a time.
        ("engine_cpu_seconds", F64),
        ("idle_engine_cpu_seconds", F64),
    ]
)

# One row per timed request (warm-up requests are stored with workload's pass_id "warmup-*"
# and never counted).
REQUESTS = pa.schema(
    [
        ("evaluation_id", STR),
        ("pass_id", STR),
        ("engine", STR),
        ("workload", STR),
        ("pass_index", I64),
        ("request_id", STR),  # unique within the evaluation
        ("lane", I64),
        ("session_id", STR),
        ("turn", I64),
        ("seed", I64),
        ("sent_at", F64),
        ("first_token_at", F64),  # first chunk with text; null if none
        ("last_token_at", F64),  # last chunk with text; null if none
        ("ended_at", F64),  # when the stream ended ([DONE], error, or cut at the grace end)
        ("prompt_tokens", I64),  # counted by the client with the target's tokenizer
        ("usage_prompt_tokens", I64),  # from `usage`
        ("cached_tokens", I64),  # usage.prompt_tokens_details.cached_tokens
        ("output_tokens", I64),  # counted by the arena from the returned text
        ("usage_completion_tokens", I64),  # what the engine claims (shown, never trusted)
        ("max_tokens", I64),
        ("done", BOOL),  # the stream ended with `data: [DONE]` and every event before it was readable
        ("finish_reason", STR),
        ("error", STR),  # null when none: what failed on the wire or in what the engine sent
        ("window_cut", BOOL),  # the history was cut by the window rule
        ("chunk_times", pa.list_(F64)),  # arrival time of every chunk carrying text
        ("chunk_tokens", pa.list_(I64)),  # tokens of the reply attributed to each chunk
        ("chunk_chars", pa.list_(I64)),  # characters of each chunk: with the reply's text (replies), each
        # chunk's span, from which chunk_tokens is re-derived
    ]
)

# The reply texts of timed requests, apart from the request rows, so that no public view
# needs to touch text and the likelihood probe can score them.
REPLIES = pa.schema(
    [
        ("evaluation_id", STR),
        ("request_id", STR),
        ("engine", STR),
        ("text", STR),
    ]
)

# Prometheus samples of /metrics, read before and after every pass.
METRICS = pa.schema(
    [
        ("evaluation_id", STR),
        ("pass_id", STR),
        ("engine", STR),
        ("phase", STR),  # before | after
        ("taken_at", F64),
        ("name", STR),  # sample name, e.g. vllm:spec_decode_num_accepted_tokens_total
        ("labels", STR),  # JSON object
        ("value", F64),
    ]
)

# Device memory sampled from outside the engine (NVML) during timed passes.
MEMORY = pa.schema(
    [
        ("evaluation_id", STR),
        ("pass_id", STR),
        ("engine", STR),
        ("sampled_at", F64),
        ("used_bytes", I64),  # device-wide used memory; null when the read failed
        ("total_bytes", I64),
        ("engine_bytes", I64),  # sum over the engine's processes, null if NVML hides them
        ("error", STR),  # why this sample's read failed (a failed read is a row, never a zero)
    ]
)

# Host contention (SCORING.md), sampled from outside the engine during timed passes: one row per
# interval between two samples.
CONTENTION = pa.schema(
    [
        ("evaluation_id", STR),
        ("pass_id", STR),
        ("engine", STR),
        ("started_at", F64),  # the interval's start and end (runner clock)
        ("ended_at", F64),
        ("cpu_seconds", F64),  # CPU time used by everything on the machine (not idle, not steal)
        ("own_cpu_seconds", F64),  # of which the engine's and the runner's process trees
        ("foreign_cpu_seconds", F64),  # cpu_seconds - own_cpu_seconds (at least 0)
        ("steal_seconds", F64),  # CPU steal (a hypervisor ran something else)
        ("total_cpu_seconds", F64),  # every CPU second of the interval (incl. idle and steal)
        ("cpus", I64),
        ("foreign_gpu_processes", I64),  # processes on the device outside the engine; null without a device
        ("foreign_gpu_bytes", I64),
        ("foreign_gpu_pids", STR),  # JSON list of those pids
        ("gpu_utilization", F64),  # percent, device-wide; null without a device
        ("throttle_reasons", I64),  # NVML clocks-event reasons bitmask; null without a device
        ("error", STR),  # a failed read: the interval judges nothing and says why
        ("foreign_top", STR),  # JSON list of the busiest foreign processes: pid, name, cpu_seconds
    ]
)

# The slices of a sliced pass (`interleaving.slice_seconds`, runners/sliced.py): one row per slice,
# the wall times an engine was thawed alone; the pass's other rows are on each engine's clock.
SLICES = pa.schema(
    [
        ("evaluation_id", STR),
        ("workload", STR),
        ("pass_id", STR),
        ("pass_index", I64),
        ("engine", STR),  # the engine thawed in this slice
        ("slice_index", I64),  # its place in the pass, from 0
        ("started_at", F64),  # thawed (runner clock)
        ("ended_at", F64),  # frozen again
        ("cpu_seconds", F64),  # its control group's CPU over the slice
        ("other_cpu_seconds", F64),  # the frozen engine's group's CPU over the slice (0 unless it escaped)
    ]
)

# The sessions each timed pass served, with their pool's family and app: one row per pass, engine
# and session (the same sessions for both engines). What requests.session_id joins to when the
# board and analysts split a figure by family or app; no text.
SESSIONS = pa.schema(
    [
        ("evaluation_id", STR),
        ("pass_id", STR),
        ("engine", STR),
        ("session_id", STR),
        ("family", STR),  # agent | chat
        ("app", STR),  # the pool's app: mini-swe-agent, tau-bench-airline, ...
    ]
)

# Greedy agreement probe: one row per prompt per engine.
PROBE_GREEDY = pa.schema(
    [
        ("evaluation_id", STR),
        ("engine", STR),
        ("prompt_id", STR),
        ("prompt_index", I64),
        ("token_ids", pa.list_(I64)),  # the reply tokenized with the target's tokenizer
        ("text", STR),
        ("answered", BOOL),
        ("error", STR),
    ]
)

# Likelihood / first-choice probe: each sampled timed reply of either engine, scored by the stock engine.
PROBE_SCORED = pa.schema(
    [
        ("evaluation_id", STR),
        ("reply_engine", STR),  # whose timed reply (candidate | stock)
        ("scorer_engine", STR),  # stock
        ("request_id", STR),
        ("sample_index", I64),
        ("token_ids", pa.list_(I64)),  # the scored reply's tokens, tokenized by the arena (the positions scored)
        ("context_sha256", STR),  # sha256 of the JSON of the scored messages (context + cut reply)
        ("token_logprobs", pa.list_(F64)),
        ("token_ranks", pa.list_(I64)),
        ("answered", BOOL),
        ("error", STR),
    ]
)

# Target fidelity probe: each engine's prompt_logprobs of the same fixed texts.
PROBE_FIDELITY = pa.schema(
    [
        ("evaluation_id", STR),
        ("engine", STR),
        ("text_id", STR),
        ("token_ids", pa.list_(I64)),  # the text's reply tokens, tokenized by the arena (the positions scored)
        ("token_logprobs", pa.list_(F64)),
        ("answered", BOOL),
        ("error", STR),
    ]
)

# One row per engine start.
ENGINE_STARTS = pa.schema(
    [
        ("evaluation_id", STR),
        ("engine", STR),  # candidate | stock
        ("purpose", STR),  # timed | probe
        ("start_index", I64),
        ("started_at", F64),
        ("healthy_at", F64),  # null when /health never answered
        ("stopped_at", F64),
        ("exit_code", I64),
        ("stop_signal", STR),  # SIGTERM | SIGKILL | exited
        ("run_as_user", STR),
        ("unprivileged", BOOL),  # false when the runner could not drop privileges (recorded, not hidden)
        ("offload_detected", BOOL),
        ("offload_evidence", STR),
        ("died", BOOL),  # exited while it should have been serving
        ("device_idle_seconds", F64),  # wait until the device held < max_gib after the stop
        ("device_idle_ok", BOOL),  # null when there is no device to watch
        ("log_text", STR),  # the start-up log (tail), never shown publicly for test splits
    ]
)

TABLES: dict[str, pa.Schema] = {
    "evaluations": EVALUATIONS,
    "passes": PASSES,
    "requests": REQUESTS,
    "replies": REPLIES,
    "metrics": METRICS,
    "memory": MEMORY,
    "contention": CONTENTION,
    "slices": SLICES,
    "sessions": SESSIONS,
    "probe_greedy": PROBE_GREEDY,
    "probe_scored": PROBE_SCORED,
    "probe_fidelity": PROBE_FIDELITY,
    "engine_starts": ENGINE_STARTS,
}

# ---- LowBArena's raw tables (the second arena; docs/warehouse.md). Kept apart from TABLES: the
# speculator arena's catalog, packs and board fingerprints read TABLES only, so a LowBArena row
# never changes what they scan. The store writes, reads and views both (RAW_TABLES).

# One row per request of a timed workload pass (serve, interactive, long), per engine. Every
# request is generated to exactly `max_tokens` (ignore_eos), so the passes of both engines do the
# same work.
LOWB_REQUESTS = pa.schema(
    [
        ("evaluation_id", STR),
        ("engine", STR),  # candidate | stock (stock: BF16 of the task's model)
        ("workload", STR),  # serve | interactive | long
        ("pass_index", I64),
        ("request_index", I64),
        ("seed", I64),
        ("prompt_tokens", I64),  # by the target's tokenizer
        ("max_tokens", I64),
        ("output_tokens", I64),  # counted by the runner with the target's tokenizer; null when failed
        ("sent_at", F64),
        ("first_token_at", F64),  # null when no token arrived
        ("finished_at", F64),
        ("ok", BOOL),
        ("error", STR),
    ]
)

# One row per memory sample of an engine, every `memory_sample_interval_seconds` (0.5 s): while the
# engine idles after start-up (`phase` idle: its weights and other memory) and during each timed
# pass (`phase` pass). Memory is the device's (NVML, engine processes) on a GPU and the engine
# process tree's proportional set size on a CPU task.
LOWB_MEMORY = pa.schema(
    [
        ("evaluation_id", STR),
        ("engine", STR),
        ("phase", STR),  # idle | pass
        ("workload", STR),  # null for idle samples
        ("pass_index", I64),
        ("sampled_at", F64),
        ("bytes", I64),  # null when the read failed
        ("source", STR),  # nvml | pss
        ("error", STR),
    ]
)

# One row per accuracy item, run and engine: what the grader said of the engine's answer.
# No item text is stored: item_id is the pool's opaque id.
LOWB_ITEMS = pa.schema(
    [
        ("evaluation_id", STR),
        ("engine", STR),
        ("run_index", I64),  # 0, 1: a scored evaluation pools two runs with independent seeds
        ("item_id", STR),
        ("domain", STR),  # code | math | knowledge | commonsense | expert | long_context
        ("benchmark", STR),  # humaneval | ruler | ...
        ("seed", I64),
        ("prompt_tokens", I64),
        ("output_tokens", I64),  # null when unanswered
        ("score", F64),  # 0..1 (1: passed); null when unanswered
        ("verdict", STR),  # pass | fail | timeout | refused | error | unanswered
        ("detail", STR),  # the grader's short reason (never the item's text)
    ]
)

# The KL probe: one row per prompt and engine (answered or not) ...
LOWB_KL_PROMPTS = pa.schema(
    [
        ("evaluation_id", STR),
        ("engine", STR),
        ("prompt_id", STR),
        ("prompt_tokens", I64),
        ("answered", BOOL),
        ("error", STR),
    ]
)

# ... and one row per scored prompt position and engine: the engine's prompt_logprobs there.
LOWB_LOGPROBS = pa.schema(
    [
        ("evaluation_id", STR),
        ("engine", STR),
        ("prompt_id", STR),
        ("position", I64),
        ("token_id", I64),  # the prompt's token at this position
        ("token_logprob", F64),  # its log-probability
        ("top_ids", pa.list_(I64)),  # the engine's top-k token ids there, most likely first
        ("top_logprobs", pa.list_(F64)),
    ]
)

# What the runner read of each engine's checkpoint before any engine code ran (the contract):
# one row per tensor of its safetensors headers.
LOWB_TENSORS = pa.schema(
    [
        ("evaluation_id", STR),
        ("engine", STR),
        ("tensor", STR),  # the tensor's name in the checkpoint
        ("dtype", STR),  # safetensors dtype: BF16, F32, I8, I32, U8, F8_E4M3, ...
        ("shape", STR),  # JSON list
        ("bytes", I64),
    ]
)

# One row per engine: the checkpoint's declared format (W·A·KV, shown, not scored) and digest.
LOWB_CHECKPOINTS = pa.schema(
    [
        ("evaluation_id", STR),
        ("engine", STR),
        ("checkpoint_sha256", STR),  # of the sealed directory's manifest
        ("declared_method", STR),  # quantization_config.quant_method, or null (unquantized)
        ("declared_weights", STR),  # e.g. int8, int4, bf16
        ("declared_activations", STR),
        ("declared_kv", STR),
        ("total_bytes", I64),  # every tensor of the checkpoint
        ("device", STR),  # cpu | cuda
    ]
)

LOWB_TABLES: dict[str, pa.Schema] = {
    "lowb_requests": LOWB_REQUESTS,
    "lowb_memory": LOWB_MEMORY,
    "lowb_items": LOWB_ITEMS,
    "lowb_kl_prompts": LOWB_KL_PROMPTS,
    "lowb_logprobs": LOWB_LOGPROBS,
    "lowb_tensors": LOWB_TENSORS,
    "lowb_checkpoints": LOWB_CHECKPOINTS,
}
RAW_TABLES: dict[str, pa.Schema] = {**TABLES, **LOWB_TABLES}
