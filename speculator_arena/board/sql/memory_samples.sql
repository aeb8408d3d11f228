-- Device memory sampled from outside the engine during the timed passes, in seconds from the
-- pass's start, with the pass's budget inputs (device total, GPU_MEMORY_UTILIZATION): the
-- evaluation page's memory plot. $1 evaluation_id.
SELECT p.workload, p.pass_index, m.pass_id, m.engine,
       m.sampled_at - p.started_at AS second,
       m.used_bytes, m.engine_bytes,
       coalesce(p.device_total_bytes, m.total_bytes) AS total_bytes,
       p.gpu_memory_utilization
FROM raw_memory m
JOIN raw_passes p ON p.evaluation_id = m.evaluation_id AND p.pass_id = m.pass_id AND p.engine = m.engine
WHERE m.evaluation_id = $1
ORDER BY p.workload, p.pass_index, m.engine, second
