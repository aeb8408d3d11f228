-- Per evaluation, the count slack its requests are counted with under the protocol being scored
-- (relation scoring_rules; 0 for a task the version does not define), as sql/busy_pass_rows.sql
-- applies it: the request store's key beside the fingerprint (scoring/request_store.py).
SELECT e.evaluation_id, coalesce(max(k.count_slack_tokens), 0) AS count_slack_tokens
FROM raw_evaluations AS e
LEFT JOIN scoring_rules AS k USING (task_id)
GROUP BY e.evaluation_id
