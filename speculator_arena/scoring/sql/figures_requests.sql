-- Shown figures per engine, per workload and overall (workload 'all'), from counted requests.
-- Percentiles by linear interpolation (quantile_cont; one sort per measure for all its
-- percentiles). `*_missing` count the counted requests that lack an input of a figure, so the
-- caller blanks that figure instead of reporting a figure over fewer rows.
-- The two means sum their terms exactly, each rounded to 1e-12 s (latency) or 1e-18 (a share):
-- a sum of doubles depends in its last bits on the order of its terms, and DuckDB's threads
-- hand rows over in varying order; sorting the terms instead cost a second per 1,000 evaluations.
WITH r AS (
    SELECT evaluation_id, engine, workload, first_token_at, last_token_at, usage_prompt_tokens, cached_tokens,
           output_tokens, chunks,
           first_token_at - sent_at AS ttft,
           CASE WHEN output_tokens > 1 THEN (last_token_at - first_token_at) / (output_tokens - 1) END AS tpot,
           ended_at - sent_at AS latency
    FROM staged_requests
    WHERE counted AND ($ids IS NULL OR list_contains($ids, evaluation_id))
),
g AS (
    SELECT evaluation_id, engine, coalesce(workload, 'all') AS workload,
           count(*) AS counted_requests,
           count(*) FILTER (WHERE first_token_at IS NULL OR last_token_at IS NULL) AS timing_missing,
           count(*) FILTER (WHERE usage_prompt_tokens IS NULL OR cached_tokens IS NULL) AS usage_missing,
           quantile_cont(ttft, [0.5, 0.9, 0.99]) AS ttft_q,
           quantile_cont(tpot, [0.5, 0.9, 0.99]) AS tpot_q,
           sum(latency::DECIMAL(38, 12))::DOUBLE / count(latency) AS latency_mean,
           quantile_cont(latency, [0.5, 0.95]) AS latency_q,
           sum(output_tokens) AS generated_tokens,
           sum(cached_tokens)::DOUBLE / nullif(sum(usage_prompt_tokens), 0) AS cache_hit_tokens,
           sum((cached_tokens::DOUBLE / nullif(usage_prompt_tokens, 0))::DECIMAL(38, 18))::DOUBLE
               / count(cached_tokens::DOUBLE / nullif(usage_prompt_tokens, 0)) AS cache_hit_mean,
           sum(output_tokens)::DOUBLE / nullif(sum(chunks), 0) AS tokens_per_chunk
    FROM r
    GROUP BY GROUPING SETS ((evaluation_id, engine, workload), (evaluation_id, engine))
)
SELECT evaluation_id, engine, workload, counted_requests, timing_missing, usage_missing,
       ttft_q[1] AS ttft_p50, ttft_q[2] AS ttft_p90, ttft_q[3] AS ttft_p99,
       tpot_q[1] AS tpot_p50, tpot_q[2] AS tpot_p90, tpot_q[3] AS tpot_p99,
       latency_mean, latency_q[1] AS latency_p50, latency_q[2] AS latency_p95,
       generated_tokens, cache_hit_tokens, cache_hit_mean, tokens_per_chunk
FROM g
