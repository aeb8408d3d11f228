-- Host contention per timed pass and engine (SCORING.md "Host contention"): the sums over the
-- pass's sampled intervals the scorer judges against the protocol's contention limits.
-- A sum (or mean) of doubles adds its terms in the order of their values (ORDER BY the term):
-- its last bits depend on that order, and DuckDB's threads hand rows over in varying order.
WITH c AS (
    SELECT * FROM raw_contention
    WHERE pass_id NOT LIKE 'warmup%' AND ($ids IS NULL OR list_contains($ids, evaluation_id))
)
SELECT evaluation_id, pass_id, engine,
       count(*) FILTER (WHERE error IS NULL) AS intervals,
       count(*) FILTER (WHERE error IS NOT NULL) AS failed_reads,
       sum(ended_at - started_at ORDER BY ended_at - started_at) FILTER (WHERE error IS NULL) AS seconds,
       sum(foreign_cpu_seconds ORDER BY foreign_cpu_seconds) FILTER (WHERE error IS NULL) AS foreign_cpu_seconds,
       sum(steal_seconds ORDER BY steal_seconds) FILTER (WHERE error IS NULL) AS steal_seconds,
       sum(total_cpu_seconds ORDER BY total_cpu_seconds) FILTER (WHERE error IS NULL) AS total_cpu_seconds,
       max(foreign_gpu_processes) AS foreign_gpu_processes,
       max(foreign_gpu_bytes) AS foreign_gpu_bytes
FROM c
GROUP BY ALL
