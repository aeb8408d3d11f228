-- Each pass's memory sampling status and note, and what its budget is computed from.
-- $1 evaluation_id.
SELECT workload, pass_index, pass_id, engine, status, memory_status, memory_note,
       device_total_bytes, gpu_memory_utilization, started_at, ends_at, finished_at
FROM raw_passes
WHERE evaluation_id = $1
ORDER BY workload, pass_index, engine
