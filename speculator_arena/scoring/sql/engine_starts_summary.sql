-- Per evaluation and engine: did it die, offload, or leave the device busy after its stop.
SELECT evaluation_id, engine, count(*) AS starts,
       bool_or(coalesce(died, false)) AS died,
       bool_or(coalesce(offload_detected, false)) AS offload,
       string_agg(DISTINCT offload_evidence, '; ') AS offload_evidence,
       bool_or(device_idle_ok = false) AS device_not_idle
FROM raw_engine_starts
WHERE $ids IS NULL OR list_contains($ids, evaluation_id)
GROUP BY ALL
