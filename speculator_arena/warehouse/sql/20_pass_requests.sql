-- Per pass and engine: request counts, failures and the request-time speed of SCORING.md
-- (sum of counted output tokens / sum of (last token - sent) over counted requests; the sums are
-- the view pass_request_sums).
CREATE OR REPLACE VIEW pass_requests AS
SELECT
    p.evaluation_id, p.pass_id, p.engine, p.workload, p.pass_index, p.lanes, p.status AS pass_status,
    coalesce(req.requests, 0) AS requests, coalesce(req.counted, 0) AS counted,
    coalesce(req.failures, 0) AS failures, coalesce(req.counted_tokens, 0) AS counted_tokens,
    req.request_seconds,
    CASE WHEN req.request_seconds > 0 THEN req.counted_tokens / req.request_seconds END AS request_time_speed
FROM raw_passes AS p
LEFT JOIN pass_request_sums AS req USING (evaluation_id, pass_id, engine)
WHERE p.pass_id NOT LIKE 'warmup%'
