-- Every stored timed pass of each engine (the host-contention rule needs one row per pass).
SELECT DISTINCT evaluation_id, pass_id, engine FROM raw_passes
WHERE pass_id NOT LIKE 'warmup%' AND ($ids IS NULL OR list_contains($ids, evaluation_id))
