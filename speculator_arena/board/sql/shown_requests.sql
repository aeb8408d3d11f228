-- Per engine and workload, from the timed requests (the warehouse's view staged_requests): how
-- many there are and count; the counted ones that lack what a figure needs (chunk times, a
-- sessions row); decode time and steps as the stream shows them (from a request's first chunk to
-- its last, over its chunks after the first: the speedup proxy's time per step); and goodput's
-- good requests, counted with TTFT and TPOT within the workload's objectives (relation
-- `goodput_objectives` per evaluation and workload, registered by the caller; a one-token reply
-- has no TPOT and meets it).
-- $1 evaluation ids.
WITH fam AS (
    SELECT DISTINCT evaluation_id, pass_id, engine, session_id
    FROM raw_sessions
    WHERE list_contains($1, evaluation_id)
), r AS (
    SELECT q.*, f.session_id IS NOT NULL AS has_session,
           q.first_token_at - q.sent_at AS ttft,
           CASE WHEN q.output_tokens > 1 THEN (q.last_token_at - q.first_token_at) / (q.output_tokens - 1) END AS tpot
    FROM staged_requests AS q
    LEFT JOIN fam AS f USING (evaluation_id, pass_id, engine, session_id)
    WHERE list_contains($1, q.evaluation_id)
)
SELECT r.evaluation_id, r.engine, r.workload,
       count(*) AS requests,
       count(*) FILTER (WHERE counted) AS counted,
       count(*) FILTER (WHERE counted AND output_tokens > 0
                        AND (first_token_at IS NULL OR last_token_at IS NULL OR coalesce(chunks, 0) = 0)) AS timing_missing,
       count(*) FILTER (WHERE counted AND NOT has_session) AS session_missing,
       sum(last_token_at - first_token_at) FILTER (WHERE counted AND chunks > 1) AS decode_seconds,
       sum(chunks - 1) FILTER (WHERE counted AND chunks > 1) AS decode_steps,
       count(*) FILTER (WHERE counted AND ttft <= o.ttft_seconds
                        AND (output_tokens <= 1 OR tpot <= o.tpot_seconds)) AS good
FROM r
LEFT JOIN goodput_objectives AS o USING (evaluation_id, workload)
GROUP BY ALL
