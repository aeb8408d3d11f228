-- Requests per probe check and the engine they are charged to, and how many were left
-- unanswered. The likelihood check asks the stock engine to score both engines' sampled replies:
-- an item is charged to the engine whose reply it scores (reply_engine). The stock engine and the
-- procedure are the same on both sides, only the text differs, so when the stock engine scores
-- its own replies within the limit, failures on the candidate's replies are the candidate's text
-- (an empty reply, text it cannot score): the candidate's failure, never a void (SCORING.md
-- "Outcomes"); a stock engine that fails its own replies voids, whatever it did with the others.
SELECT evaluation_id, 'greedy_agreement' AS probe_check, engine, count(*) AS requests,
       count(*) FILTER (WHERE NOT coalesce(answered, false)) AS unanswered
FROM raw_probe_greedy WHERE $ids IS NULL OR list_contains($ids, evaluation_id) GROUP BY ALL
UNION ALL
SELECT evaluation_id, 'sampled_likelihood', reply_engine, count(*),
       count(*) FILTER (WHERE NOT coalesce(answered, false))
FROM raw_probe_scored WHERE $ids IS NULL OR list_contains($ids, evaluation_id) GROUP BY ALL
UNION ALL
SELECT evaluation_id, 'target_fidelity', engine, count(*),
       count(*) FILTER (WHERE NOT coalesce(answered, false))
FROM raw_probe_fidelity WHERE $ids IS NULL OR list_contains($ids, evaluation_id) GROUP BY ALL
