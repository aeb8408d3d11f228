-- Timed requests that did not count, grouped by what went wrong, per pass and engine.
-- Error texts are returned only for dev evaluations: an engine's error message can echo its
-- prompt, and a test evaluation's prompts come from the hidden pool. $1 evaluation_id.
SELECT r.workload, r.pass_index, r.engine,
       CASE
           WHEN r.error IS NOT NULL THEN 'error'
           WHEN NOT coalesce(r.done, false) THEN 'no [DONE]'
           WHEN r.output_tokens > r.max_tokens THEN 'over max_tokens'
           ELSE 'other'
       END AS failure,
       CASE WHEN e.split = 'dev' THEN left(r.error, 300) ELSE NULL END AS error,
       count(*) AS requests
FROM raw_requests r
JOIN raw_evaluations e USING (evaluation_id)
WHERE r.evaluation_id = $1 AND r.pass_id NOT LIKE 'warmup%'
  AND (r.error IS NOT NULL OR NOT coalesce(r.done, false) OR r.output_tokens > r.max_tokens)
GROUP BY ALL
ORDER BY r.workload, r.pass_index, r.engine, requests DESC
