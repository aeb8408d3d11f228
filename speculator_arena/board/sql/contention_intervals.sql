-- Host contention over time (SCORING.md "Host contention"): each sampled interval of the timed
-- passes, in seconds from the pass's start, with the foreign CPU it held (in cores) and steal.
-- $1 evaluation_id.
SELECT p.workload, p.pass_index, c.pass_id, c.engine,
       c.ended_at - p.started_at AS second,
       c.foreign_cpu_seconds / nullif(c.ended_at - c.started_at, 0) AS foreign_cores,
       c.steal_seconds / nullif(c.total_cpu_seconds, 0) AS steal_share,
       c.foreign_gpu_processes, c.error
FROM raw_contention c
JOIN raw_passes p ON p.evaluation_id = c.evaluation_id AND p.pass_id = c.pass_id AND p.engine = c.engine
WHERE c.evaluation_id = $1
ORDER BY p.workload, p.pass_index, c.engine, second
