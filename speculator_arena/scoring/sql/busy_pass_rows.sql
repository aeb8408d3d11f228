-- The pass rows the scorer's Parquet scan (scoring/busy_scan.py) joins requests to, with the
-- count slack of each evaluation's task under the protocol being scored (relation scoring_rules).
SELECT p.evaluation_id, p.pass_id, p.engine, p.lanes, p.ends_at, p.grace_ends_at,
       coalesce((SELECT max(k.count_slack_tokens) FROM raw_evaluations AS e JOIN scoring_rules AS k USING (task_id)
                 WHERE e.evaluation_id = p.evaluation_id), 0) AS count_slack_tokens
FROM raw_passes AS p
