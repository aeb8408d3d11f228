-- Peak device memory per engine over the timed passes' samples, and the device total.
SELECT evaluation_id, engine, count(*) AS samples, max(used_bytes) AS peak_bytes, max(total_bytes) AS total_bytes
FROM raw_memory
WHERE pass_id NOT LIKE 'warmup%' AND ($ids IS NULL OR list_contains($ids, evaluation_id))
GROUP BY ALL
