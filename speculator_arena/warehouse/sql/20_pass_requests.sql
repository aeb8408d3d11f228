-- Per pass and engine: request counts, failures and the request-time speed of SCORING.md
-- (sum of counted output tokens / sum of (last token - sent) over counted requests).
CREATE OR REPLACE VIEW pass_requests AS
WITH req AS (
    SELECT evaluation_id, pass_id, engine,
           count(*) AS requests,
           count(*) FILTER (WHERE counted) AS counted,
           count(*) FILTER (WHERE NOT counted) AS failures,
           sum(output_tokens) FILTER (WHERE counted) AS counted_tokens,
           sum(last_token_at - sent_at) FILTER (WHERE counted) AS request_seconds
    FROM staged_requests
    GROUP BY ALL
)
SELECT
    p.evaluation_id, p.pass_id, p.engine, p.workload, p.pass_index, p.lanes, p.status AS pass_status,
    coalesce(req.requests, 0) AS requests, coalesce(req.counted, 0) AS counted,
    coalesce(req.failures, 0) AS failures, coalesce(req.counted_tokens, 0) AS counted_tokens,
    req.request_seconds,
    CASE WHEN req.request_seconds > 0 THEN req.counted_tokens / req.request_seconds END AS request_time_speed
FROM raw_passes AS p
LEFT JOIN req USING (evaluation_id, pass_id, engine)
WHERE p.pass_id NOT LIKE 'warmup%'
