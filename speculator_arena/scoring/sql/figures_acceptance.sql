-- The engine's speculative-decoding counters, differenced around each pass (after - before),
-- summed over label sets. Passes lacking either side are counted so the caller blanks.
WITH per AS (
    SELECT evaluation_id, engine, pass_id, name,
           sum(value) FILTER (WHERE phase = 'after') AS after_v,
           sum(value) FILTER (WHERE phase = 'before') AS before_v
    FROM raw_metrics
    WHERE pass_id NOT LIKE 'warmup%' AND name LIKE 'vllm:spec_decode_%'
      AND ($ids IS NULL OR list_contains($ids, evaluation_id))
    GROUP BY ALL
)
SELECT evaluation_id, engine, name, count(DISTINCT pass_id) AS passes,
       count(*) FILTER (WHERE after_v IS NULL OR before_v IS NULL) AS passes_missing_side,
       sum(after_v - before_v) AS delta
FROM per
GROUP BY ALL
