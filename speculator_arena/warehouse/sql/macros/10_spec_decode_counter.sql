-- Which of the pinned vLLM's speculative-decoding counters a /metrics sample is, by its exact
-- name (with or without the `_total` suffix Prometheus text gives counters); NULL for any other
-- name. The one home of these names: the view spec_decode_counters reads it, and so does the
-- analysts' database, which copies a test evaluation's metric name only when it is one of them.
CREATE OR REPLACE MACRO spec_decode_counter(name) AS CASE
    WHEN name IN ('vllm:spec_decode_num_drafts', 'vllm:spec_decode_num_drafts_total') THEN 'drafts'
    WHEN name IN ('vllm:spec_decode_num_draft_tokens', 'vllm:spec_decode_num_draft_tokens_total') THEN 'draft_tokens'
    WHEN name IN ('vllm:spec_decode_num_accepted_tokens', 'vllm:spec_decode_num_accepted_tokens_total')
        THEN 'accepted_tokens'
    WHEN name IN ('vllm:spec_decode_num_accepted_tokens_per_pos', 'vllm:spec_decode_num_accepted_tokens_per_pos_total')
        THEN 'accepted_tokens_per_pos'
END
