-- Acceptance as the context grows, seen from the stream: counted timed requests' streamed tokens
-- and chunks (the arena's own count of each chunk, requests.chunk_tokens) per engine, workload,
-- the session's family (the runner's sessions rows; NULL where an evaluation has none) and a bin
-- of one of two axes: `prompt_tokens` (the arena's count of the prompt, in powers of two:
-- [2^k, 2^(k+1)), 0 for an empty prompt) and `turn` (the request's turn within its session).
-- Per request, not per pass: the engine's counters are read around a pass and cannot be split by
-- prompt length or turn. `ratio_sum` is the sum over the bin's requests of each one's tokens per
-- chunk (its mean is the per-request mean; tokens / chunks is the per-chunk one), summed exactly as
-- decimals rounded to 1e-12 so that it is the same to the last bit whatever order DuckDB's threads
-- hand the requests over in (a double sum was not), and the rows come ordered for the caller's sums
-- over workloads. Requests that
-- streamed no chunk are left out; the caller blanks a workload with a counted request that lacks
-- chunk times or a sessions row. $1 evaluation ids.
WITH fam AS (
    SELECT evaluation_id, pass_id, engine, session_id, min(family) AS family
    FROM raw_sessions
    WHERE list_contains($1, evaluation_id)
    GROUP BY ALL
), r AS (
    SELECT q.evaluation_id, q.engine, q.workload, f.family, q.turn,
           CASE WHEN coalesce(q.prompt_tokens, 0) < 1 THEN 0
                ELSE CAST(pow(2, floor(log2(q.prompt_tokens))) AS BIGINT) END AS prompt_bin,
           q.chunks, CAST(list_sum(q.chunk_tokens) AS BIGINT) AS tokens
    FROM staged_requests AS q
    LEFT JOIN fam AS f USING (evaluation_id, pass_id, engine, session_id)
    WHERE q.counted AND q.chunks > 0 AND list_contains($1, q.evaluation_id)
), axes AS (
    SELECT evaluation_id, engine, workload, family, 'prompt_tokens' AS axis, prompt_bin AS bin_low,
           CASE WHEN prompt_bin = 0 THEN 1 ELSE 2 * prompt_bin END AS bin_high, chunks, tokens
    FROM r
    UNION ALL
    SELECT evaluation_id, engine, workload, family, 'turn' AS axis, turn AS bin_low, turn + 1 AS bin_high,
           chunks, tokens
    FROM r
)
SELECT evaluation_id, engine, workload, family, axis, bin_low, bin_high,
       count(*) AS requests, sum(chunks) AS chunks, sum(tokens) AS tokens,
       CAST(sum(CAST(CAST(tokens AS DOUBLE) / chunks AS DECIMAL(38, 12))) AS DOUBLE) AS ratio_sum
FROM axes
GROUP BY ALL
ORDER BY evaluation_id, engine, workload, family NULLS FIRST, axis, bin_low
