-- Each evaluation's scoring rules of the protocol version being read (relation `scoring_rules`,
-- one row per task, registered by whoever opens the connection): one row per evaluation id, so
-- that joining it never repeats a row.
CREATE OR REPLACE VIEW evaluation_rules AS
SELECT e.evaluation_id, max(k.count_slack_tokens) AS count_slack_tokens
FROM raw_evaluations AS e
JOIN scoring_rules AS k USING (task_id)
GROUP BY e.evaluation_id
