-- The candidate's speculative-decoding counters differenced around each timed pass (after -
-- before, summed over label sets), one row per pass: drafts and accepted tokens, with NULL where
-- either side of either counter was not read, and `down` when a count went down during the pass
-- (the engine restarted, or its report is wrong). board/history.py reads each pass's acceptance
-- length, 1 + accepted / drafts, for the acceptance spread across passes (shown, never scored).
-- $1 evaluation ids.
WITH per AS (
    SELECT evaluation_id, workload, pass_id, counter,
           sum(value ORDER BY value) FILTER (WHERE phase = 'after') AS after_v,
           sum(value ORDER BY value) FILTER (WHERE phase = 'before') AS before_v
    FROM spec_decode_counters
    WHERE list_contains($1, evaluation_id) AND engine = 'candidate' AND position IS NULL
      AND counter IN ('drafts', 'accepted_tokens')
    GROUP BY ALL
)
SELECT evaluation_id, workload, pass_id,
       max(after_v - before_v) FILTER (WHERE counter = 'drafts') AS drafts,
       max(after_v - before_v) FILTER (WHERE counter = 'accepted_tokens') AS accepted,
       bool_or(after_v < before_v) AS down
FROM per
GROUP BY ALL
ORDER BY evaluation_id, pass_id
