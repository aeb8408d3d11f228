-- The engine's speculative-decoding counters as read before and after each timed pass: one row
-- per sample, named by counter (`drafts`, `draft_tokens`, `accepted_tokens`,
-- `accepted_tokens_per_pos`) with the draft position of a per-position sample (NULL for the
-- totals, and for a per-position sample whose position cannot be read). Cumulative: a figure
-- differences each pass's `after` and `before` (board/sql/shown_counters.sql). Warm-up rows left out.
CREATE OR REPLACE VIEW spec_decode_counters AS
SELECT evaluation_id, pass_id, engine, split_part(pass_id, '-', 1) AS workload, phase, taken_at,
       spec_decode_counter(name) AS counter,
       CASE WHEN spec_decode_counter(name) = 'accepted_tokens_per_pos' THEN spec_decode_position(labels) END AS position,
       value
FROM raw_metrics
WHERE spec_decode_counter(name) IS NOT NULL AND pass_id NOT LIKE 'warmup%'
