-- Per scored timed reply: s_r (sum of log-probabilities), x_r (tokens not the target's first
-- choice) and n_r (tokens); the cluster statistics are computed from these sums in Python.
SELECT evaluation_id, reply_engine, request_id,
       list_sum(token_logprobs) AS s, len(list_filter(token_ranks, lambda r: r <> 1)) AS x,
       len(token_logprobs) AS n
FROM raw_probe_scored
WHERE coalesce(answered, false) AND ($ids IS NULL OR list_contains($ids, evaluation_id))
