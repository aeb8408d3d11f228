-- The engine's speculative-decoding counters, differenced around each pass (after - before),
-- summed over label sets. Passes lacking either side are counted so the caller blanks.
-- Counters are told by their exact names (the warehouse's macro spec_decode_counter): a prefix
-- would take the per-position counter (`..._num_accepted_tokens_per_pos`) for the total.
-- Each sum adds its terms in the order of their values (ORDER BY the term): a sum of doubles
-- depends on the order of its terms in the last bit, and the order in which DuckDB's threads
-- hand rows over varies from run to run (the shown mean acceptance length moved by 1 ulp).
WITH per AS (
    SELECT evaluation_id, engine, pass_id, spec_decode_counter(name) AS counter,
           sum(value ORDER BY value) FILTER (WHERE phase = 'after') AS after_v,
           sum(value ORDER BY value) FILTER (WHERE phase = 'before') AS before_v
    FROM raw_metrics
    WHERE pass_id NOT LIKE 'warmup%' AND spec_decode_counter(name) IN ('drafts', 'draft_tokens', 'accepted_tokens')
      AND ($ids IS NULL OR list_contains($ids, evaluation_id))
    GROUP BY ALL
)
SELECT evaluation_id, engine, counter, count(DISTINCT pass_id) AS passes,
       count(*) FILTER (WHERE after_v IS NULL OR before_v IS NULL) AS passes_missing_side,
       sum(after_v - before_v ORDER BY after_v - before_v) AS delta
FROM per
GROUP BY ALL
