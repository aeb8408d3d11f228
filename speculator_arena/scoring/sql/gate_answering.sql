-- Requests per probe check and the engine asked, and how many it left unanswered. In the
-- likelihood check the engine asked is the scorer (the stock engine).
SELECT evaluation_id, 'greedy_agreement' AS probe_check, engine, count(*) AS requests,
       count(*) FILTER (WHERE NOT coalesce(answered, false)) AS unanswered
FROM raw_probe_greedy WHERE $ids IS NULL OR list_contains($ids, evaluation_id) GROUP BY ALL
UNION ALL
SELECT evaluation_id, 'sampled_likelihood', scorer_engine, count(*),
       count(*) FILTER (WHERE NOT coalesce(answered, false))
FROM raw_probe_scored WHERE $ids IS NULL OR list_contains($ids, evaluation_id) GROUP BY ALL
UNION ALL
SELECT evaluation_id, 'target_fidelity', engine, count(*),
       count(*) FILTER (WHERE NOT coalesce(answered, false))
FROM raw_probe_fidelity WHERE $ids IS NULL OR list_contains($ids, evaluation_id) GROUP BY ALL
