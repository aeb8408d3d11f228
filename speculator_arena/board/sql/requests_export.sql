-- A dev evaluation's timed requests for download (the evaluation page's export, GET
-- /api/evaluations/{id}/requests.parquet): the request columns the analysts' database holds for
-- a dev evaluation, whether each counts (the view staged_requests, under the version read) and
-- its session's family and app, and its tokens per chunk (the arena's count: acceptance per request
-- as the stream shows it, exact only for an engine that streams one chunk per step; NULL without
-- a chunk), the per-request figure behind acceptance against prompt length and turn. No rows for an evaluation that is not dev-split on every one of
-- its evaluations rows: a test evaluation's requests come from the hidden pool. $1 evaluation_id.
WITH fam AS (
    SELECT evaluation_id, pass_id, engine, session_id, min(family) AS family, min(app) AS app
    FROM raw_sessions
    WHERE evaluation_id = $1
    GROUP BY ALL
)
SELECT r.evaluation_id, r.pass_id, r.engine, r.workload, r.pass_index, r.request_id, r.lane,
       r.session_id, f.family, f.app, r.turn, r.seed,
       r.sent_at, r.first_token_at, r.last_token_at, r.ended_at,
       r.prompt_tokens, r.usage_prompt_tokens, r.cached_tokens, r.output_tokens, r.usage_completion_tokens,
       r.max_tokens, r.done, r.finish_reason, r.error, r.window_cut, q.counted,
       r.chunk_times, r.chunk_tokens, r.chunk_chars,
       CASE WHEN len(r.chunk_tokens) > 0 THEN CAST(list_sum(r.chunk_tokens) AS DOUBLE) / len(r.chunk_tokens) END
           AS tokens_per_chunk
FROM raw_requests AS r
LEFT JOIN staged_requests AS q
    ON q.evaluation_id = r.evaluation_id AND q.engine = r.engine AND q.request_id = r.request_id
LEFT JOIN fam AS f
    ON f.evaluation_id = r.evaluation_id AND f.pass_id = r.pass_id AND f.engine = r.engine AND f.session_id = r.session_id
WHERE r.evaluation_id = $1 AND r.pass_id NOT LIKE 'warmup%'
  AND EXISTS (SELECT 1 FROM raw_evaluations WHERE evaluation_id = $1 AND split = 'dev')
  AND NOT EXISTS (SELECT 1 FROM raw_evaluations WHERE evaluation_id = $1 AND split IS DISTINCT FROM 'dev')
ORDER BY r.engine, r.workload, r.pass_index, r.sent_at, r.request_id
