-- How many raw rows one evaluation holds per table: the evaluation page says which parts of
-- a partial evaluation exist. $1 evaluation_id.
SELECT 'passes' AS "table", count(*) AS "rows" FROM raw_passes WHERE evaluation_id = $1
UNION ALL SELECT 'requests', count(*) FROM raw_requests WHERE evaluation_id = $1
UNION ALL SELECT 'metrics', count(*) FROM raw_metrics WHERE evaluation_id = $1
UNION ALL SELECT 'memory', count(*) FROM raw_memory WHERE evaluation_id = $1
UNION ALL SELECT 'probe_greedy', count(*) FROM raw_probe_greedy WHERE evaluation_id = $1
UNION ALL SELECT 'probe_scored', count(*) FROM raw_probe_scored WHERE evaluation_id = $1
UNION ALL SELECT 'probe_fidelity', count(*) FROM raw_probe_fidelity WHERE evaluation_id = $1
UNION ALL SELECT 'engine_starts', count(*) FROM raw_engine_starts WHERE evaluation_id = $1
