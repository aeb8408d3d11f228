-- Every pass the protocol expects of each evaluation, with both engines' speeds, the failure
-- rule and the pass ratio. Parameters: $ids (VARCHAR[] or NULL for all). Registered relations
-- from the protocol document: protocol_limits (task_id, failure_min_excess, failure_share, ...)
-- and protocol_workloads (task_id, workload, speed_kind, passes); evaluation_passes
-- (evaluation_id, passes_run: the passes per workload it was run with, scoring/limits.py's
-- passes_run); and busy_windows (evaluation_id, pass_id, engine, busy_seconds, busy_tokens) from
-- scoring/busy.py, the same numbers as the view pass_busy.
-- Under a task's steal correction (v11 on; docs/scoring.md "Steal correction") each engine's speed
-- on a pass is its tokens over its time less the hypervisor's steal: speed / (1 - f), where f is the
-- steal CPU-seconds of the pass's sampled intervals per second of them, the steal share counted at
-- most up to the contention limit (max_steal_share), so f is at most that share times the CPUs,
-- and never over 0.5 (a guard for versions whose steal limit is loose: the test versions' 50%).
-- A sum (or mean) of doubles adds its terms in the order of their values (ORDER BY the term):
-- its last bits depend on that order, and DuckDB's threads hand rows over in varying order.
WITH ev AS (
    SELECT evaluation_id, task_id FROM raw_evaluations
    WHERE $ids IS NULL OR list_contains($ids, evaluation_id)
),
expected AS (
    SELECT ev.evaluation_id, ev.task_id, w.workload, w.speed_kind, g.pass_index,
           w.workload || '-' || g.pass_index AS pass_id
    FROM ev JOIN protocol_workloads AS w USING (task_id)
    JOIN evaluation_passes AS n USING (evaluation_id),
    range(coalesce(CAST(n.passes_run AS BIGINT), w.passes)) AS g(pass_index)
),
steal AS (
    SELECT evaluation_id, pass_id, engine, sum(steal_seconds ORDER BY steal_seconds) AS steal_seconds,
           sum(total_cpu_seconds ORDER BY total_cpu_seconds) AS total_cpu_seconds,
           sum(ended_at - started_at ORDER BY ended_at - started_at) AS seconds
    FROM raw_contention
    WHERE error IS NULL AND evaluation_id IN (SELECT evaluation_id FROM ev)
    GROUP BY ALL
),
speeds AS MATERIALIZED (
    SELECT r.*, CASE WHEN b.busy_seconds > 0 THEN b.busy_tokens / b.busy_seconds END AS busy_window_speed,
           CASE WHEN l.steal_correction AND st.seconds > 0 AND st.total_cpu_seconds > 0
                THEN least(least(st.steal_seconds / st.total_cpu_seconds, l.max_steal_share) * st.total_cpu_seconds / st.seconds, 0.5)
                ELSE 0.0 END AS steal_fraction
    FROM pass_requests AS r
    JOIN ev USING (evaluation_id)
    JOIN protocol_limits AS l ON l.task_id = ev.task_id
    LEFT JOIN busy_windows AS b USING (evaluation_id, pass_id, engine)
    LEFT JOIN steal AS st USING (evaluation_id, pass_id, engine)
),
c AS (SELECT * FROM speeds WHERE engine = 'candidate'),
s AS (SELECT * FROM speeds WHERE engine = 'stock'),
paired AS (
    SELECT x.evaluation_id, x.task_id, x.workload, x.pass_index, x.pass_id,
           c.pass_status AS candidate_status, s.pass_status AS stock_status,
           (CASE x.speed_kind WHEN 'request_time' THEN c.request_time_speed ELSE c.busy_window_speed END)
               / (1.0 - c.steal_fraction) AS candidate_speed,
           (CASE x.speed_kind WHEN 'request_time' THEN s.request_time_speed ELSE s.busy_window_speed END)
               / (1.0 - s.steal_fraction) AS stock_speed,
           c.steal_fraction AS candidate_steal_fraction, s.steal_fraction AS stock_steal_fraction,
           c.failures AS candidate_failures, s.failures AS stock_failures,
           greatest(c.requests, s.requests) AS requests,
           c.requests AS candidate_requests, s.requests AS stock_requests,
           l.failure_min_excess, l.failure_share
    FROM expected AS x
    JOIN protocol_limits AS l USING (task_id)
    LEFT JOIN c ON c.evaluation_id = x.evaluation_id AND c.pass_id = x.pass_id
    LEFT JOIN s ON s.evaluation_id = x.evaluation_id AND s.pass_id = x.pass_id
),
ruled AS (
    SELECT *,
           coalesce(candidate_failures - stock_failures > greatest(failure_min_excess, failure_share * requests), false)
               AS zeroed_by_failure_rule,
           CASE
               WHEN candidate_status IS NULL THEN 'candidate pass missing'
               WHEN stock_status IS NULL THEN 'stock pass missing'
               WHEN candidate_status <> 'complete' THEN 'candidate pass ' || candidate_status
               WHEN stock_status <> 'complete' THEN 'stock pass ' || stock_status
           END AS missing_reason
    FROM paired
)
SELECT evaluation_id, task_id, workload, pass_index, pass_id, candidate_speed, stock_speed,
       candidate_steal_fraction, stock_steal_fraction,
       CASE
           WHEN missing_reason IS NOT NULL THEN NULL
           WHEN zeroed_by_failure_rule THEN 0.0
           WHEN stock_speed IS NULL OR stock_speed <= 0 THEN NULL
           WHEN candidate_speed IS NULL THEN 0.0
           ELSE candidate_speed / stock_speed
       END AS ratio,
       CASE
           WHEN missing_reason IS NOT NULL THEN missing_reason
           WHEN zeroed_by_failure_rule THEN NULL
           WHEN stock_speed IS NULL OR stock_speed <= 0 THEN 'stock engine has no speed on this pass (no counted tokens in its window)'
       END AS ratio_reason,
       missing_reason,
       candidate_failures, stock_failures, requests, candidate_requests, stock_requests, zeroed_by_failure_rule
FROM ruled
ORDER BY evaluation_id, workload, pass_index
