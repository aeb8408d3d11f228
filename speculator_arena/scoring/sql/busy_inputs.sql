-- What the scorer's numpy busy-window sweep needs, one row per timed request (grouped by pass in numpy).
SELECT evaluation_id, pass_id, engine, lanes, sent_at, coalesce(last_token_at, ended_at) AS end_at, counted,
       chunk_times, chunk_tokens
FROM staged_requests
WHERE ($ids IS NULL OR list_contains($ids, evaluation_id))
