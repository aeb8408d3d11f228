-- Per scored timed reply: s_r (sum of log-probabilities), x_r (tokens not the target's first
-- choice) and n_r (tokens); the cluster statistics are computed from these sums in Python.
-- Ordered, so that Python adds each evaluation's squares and products in one order whichever
-- way the rows were read (packs or parts: a sum of doubles depends on its order in the last bits).
SELECT evaluation_id, reply_engine, request_id,
       list_sum(token_logprobs) AS s, len(list_filter(token_ranks, lambda r: r <> 1)) AS x,
       len(token_logprobs) AS n
FROM raw_probe_scored
WHERE coalesce(answered, false) AND ($ids IS NULL OR list_contains($ids, evaluation_id))
ORDER BY evaluation_id, reply_engine, request_id, s, x, n
