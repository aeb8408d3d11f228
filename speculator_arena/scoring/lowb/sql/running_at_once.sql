-- Per evaluation, engine and workload: the most requests running at once in any of its passes. A
-- request runs over [first_token_at, finished_at); a sweep over those events (an end before a start
-- at the same instant, since the interval is open at its end) counts the requests running after each.
WITH events AS (
    SELECT evaluation_id, engine, workload, pass_index, first_token_at AS t, 1 AS delta
    FROM raw_lowb_requests WHERE first_token_at IS NOT NULL AND finished_at IS NOT NULL
    UNION ALL
    SELECT evaluation_id, engine, workload, pass_index, finished_at AS t, -1 AS delta
    FROM raw_lowb_requests WHERE first_token_at IS NOT NULL AND finished_at IS NOT NULL
), running AS (
    SELECT evaluation_id, engine, workload, pass_index,
           sum(delta) OVER (PARTITION BY evaluation_id, engine, workload, pass_index
                            ORDER BY t, delta ROWS UNBOUNDED PRECEDING) AS at_once
    FROM events
)
SELECT evaluation_id, engine, workload, max(at_once) AS most_at_once
FROM running
GROUP BY ALL
ORDER BY ALL
