-- Output tokens per second over a pass, in bins of $2 seconds from the pass's start, per
-- engine: the evaluation page's throughput plot. Tokens come from the arena's own per-chunk
-- attribution (requests.chunk_times / chunk_tokens), never from the engine's usage claims.
-- $1 evaluation_id, $2 bin seconds.
WITH chunks AS (
    SELECT engine, pass_id, workload, pass_index,
           unnest(chunk_times) AS chunk_at, unnest(chunk_tokens) AS tokens
    FROM raw_requests
    WHERE evaluation_id = $1 AND pass_id NOT LIKE 'warmup%'
), starts AS (
    SELECT engine, pass_id, started_at FROM raw_passes WHERE evaluation_id = $1
)
SELECT c.workload, c.pass_index, c.pass_id, c.engine,
       floor((c.chunk_at - s.started_at) / $2) * $2 AS second,
       sum(coalesce(c.tokens, 0)) / $2 AS tokens_per_second
FROM chunks c JOIN starts s USING (engine, pass_id)
WHERE c.chunk_at IS NOT NULL
GROUP BY ALL
ORDER BY c.workload, c.pass_index, c.engine, second
