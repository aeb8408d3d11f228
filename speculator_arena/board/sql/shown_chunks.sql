-- Tokens per streamed chunk (the arena's own count of each chunk, requests.chunk_tokens) of
-- counted timed requests, per engine, workload and the session's family and app (the runner's
-- sessions rows; NULL where an evaluation has none): the histogram shown where an engine reports
-- no per-position counters, and acceptance by family and app. $1 evaluation ids.
WITH fam AS (
    SELECT evaluation_id, pass_id, engine, session_id, min(family) AS family, min(app) AS app
    FROM raw_sessions
    WHERE list_contains($1, evaluation_id)
    GROUP BY ALL
), chunks AS (
    SELECT evaluation_id, pass_id, engine, workload, session_id, unnest(chunk_tokens) AS tokens
    FROM staged_requests
    WHERE counted AND list_contains($1, evaluation_id)
)
SELECT c.evaluation_id, c.engine, c.workload, f.family, f.app, c.tokens, count(*) AS chunks
FROM chunks AS c
LEFT JOIN fam AS f USING (evaluation_id, pass_id, engine, session_id)
GROUP BY ALL
