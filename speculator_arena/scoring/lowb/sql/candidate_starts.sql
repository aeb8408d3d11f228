-- Per evaluation: the candidate engine's starts, those not unprivileged, and its served seconds
-- (stopped_at less healthy_at of each start that became healthy: the device-hours shown).
SELECT evaluation_id, count(*) AS starts,
       count(*) FILTER (WHERE NOT coalesce(unprivileged, false)) AS privileged,
       sum(stopped_at - healthy_at) FILTER (WHERE healthy_at IS NOT NULL AND stopped_at IS NOT NULL) AS served_seconds
FROM raw_engine_starts
WHERE engine = 'candidate'
GROUP BY ALL
ORDER BY ALL
