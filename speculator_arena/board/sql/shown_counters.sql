-- The engine's speculative-decoding counters (the warehouse's view spec_decode_counters)
-- differenced around each pass (after - before, summed over label sets), then summed over a
-- workload's passes, per counter and draft position (NULL for the totals). `passes_read`
-- counts the passes read on both sides, `passes_missing_side` those read on one side only and
-- `passes_down` those whose count went down during the pass (the engine restarted, or its
-- report is wrong), so the caller blanks instead of showing a figure over fewer passes.
-- $1 evaluation ids.
WITH per AS (
    SELECT evaluation_id, engine, workload, pass_id, counter, position,
           sum(value) FILTER (WHERE phase = 'after') AS after_v,
           sum(value) FILTER (WHERE phase = 'before') AS before_v
    FROM spec_decode_counters
    WHERE list_contains($1, evaluation_id)
    GROUP BY ALL
)
SELECT evaluation_id, engine, workload, counter, position,
       count(*) FILTER (WHERE after_v IS NOT NULL AND before_v IS NOT NULL) AS passes_read,
       count(*) FILTER (WHERE after_v IS NULL OR before_v IS NULL) AS passes_missing_side,
       count(*) FILTER (WHERE after_v < before_v) AS passes_down,
       sum(after_v - before_v) AS delta
FROM per
GROUP BY ALL
