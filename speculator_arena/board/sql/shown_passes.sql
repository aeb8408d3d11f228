-- Each engine's timed passes per workload: how many are stored complete (a figure over a
-- workload is blank unless every pass the task asks for is) and its lanes. $1 evaluation ids.
SELECT evaluation_id, engine, workload,
       count(DISTINCT pass_index) FILTER (WHERE status = 'complete') AS complete,
       max(lanes) AS lanes
FROM raw_passes
WHERE list_contains($1, evaluation_id) AND pass_id NOT LIKE 'warmup%'
GROUP BY ALL
