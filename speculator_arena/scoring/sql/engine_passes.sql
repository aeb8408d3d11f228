-- Timed passes per evaluation, engine and workload, and how many completed (figures.py blanks
-- an engine's figures with the reason when some did not).
SELECT evaluation_id, engine, workload, count(*) FILTER (WHERE status = 'complete') AS complete
FROM raw_passes
WHERE pass_id NOT LIKE 'warmup%' AND ($ids IS NULL OR list_contains($ids, evaluation_id))
GROUP BY ALL
