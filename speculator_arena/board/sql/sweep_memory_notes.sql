-- Why the candidate's device memory was not sampled, per evaluation (the runner's note on each
-- timed pass: no NVML on a CPU machine, ARENA_NO_NVML): the Sweep page shows it beside the blank
-- peak. $1 evaluation ids.
SELECT evaluation_id, string_agg(DISTINCT memory_note, '; ') AS memory_note
FROM raw_passes
WHERE list_contains($1, evaluation_id) AND engine = 'candidate' AND memory_note IS NOT NULL
  AND pass_id NOT LIKE 'warmup%'
GROUP BY evaluation_id
