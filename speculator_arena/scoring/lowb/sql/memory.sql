-- Per evaluation and engine: the median of its idle samples (weights and other memory), and per
-- workload the largest of its pass samples (what its run reserved). Failed reads (null bytes) are
-- not samples.
SELECT evaluation_id, engine, NULL AS workload, 'idle' AS phase, median(bytes) AS bytes, count(*) AS samples
FROM raw_lowb_memory WHERE phase = 'idle' AND bytes IS NOT NULL
GROUP BY ALL
UNION ALL
SELECT evaluation_id, engine, workload, 'pass' AS phase, max(bytes) AS bytes, count(*) AS samples
FROM raw_lowb_memory WHERE phase = 'pass' AND bytes IS NOT NULL
GROUP BY ALL
ORDER BY ALL
