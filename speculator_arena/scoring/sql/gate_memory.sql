-- Per evaluation and engine, over the timed passes the device was sampled in: sample count, failed
-- reads, peak device memory, the device total, and the largest gap between consecutive good
-- samples counting each pass's start and finish as bounds (samples that do not cover the passes
-- leave the gate "not measured" from protocol v2 on).
WITH p AS (
    SELECT evaluation_id, pass_id, engine, started_at, finished_at FROM raw_passes
    WHERE pass_id NOT LIKE 'warmup%' AND memory_status = 'sampled'
      AND ($ids IS NULL OR list_contains($ids, evaluation_id))
),
m AS (
    SELECT evaluation_id, pass_id, engine, sampled_at, used_bytes, total_bytes, error FROM raw_memory
    WHERE pass_id NOT LIKE 'warmup%' AND ($ids IS NULL OR list_contains($ids, evaluation_id))
),
good AS (SELECT * FROM m WHERE error IS NULL AND used_bytes IS NOT NULL),
points AS (
    SELECT evaluation_id, pass_id, engine, sampled_at AS t FROM good
    UNION ALL SELECT evaluation_id, pass_id, engine, started_at FROM p
    UNION ALL SELECT evaluation_id, pass_id, engine, finished_at FROM p
),
gaps AS (
    SELECT evaluation_id, engine, t - lag(t) OVER (PARTITION BY evaluation_id, pass_id, engine ORDER BY t) AS gap
    FROM points
),
g AS (SELECT evaluation_id, engine, max(gap) AS max_gap FROM gaps GROUP BY ALL),
s AS (
    SELECT evaluation_id, engine, count(*) FILTER (WHERE error IS NULL AND used_bytes IS NOT NULL) AS samples,
           count(*) FILTER (WHERE error IS NOT NULL OR used_bytes IS NULL) AS failed_reads,
           max(used_bytes) AS peak_bytes, max(total_bytes) AS total_bytes
    FROM m GROUP BY ALL
)
SELECT s.evaluation_id, s.engine, s.samples, s.failed_reads, s.peak_bytes, s.total_bytes, g.max_gap
FROM s LEFT JOIN g USING (evaluation_id, engine)
