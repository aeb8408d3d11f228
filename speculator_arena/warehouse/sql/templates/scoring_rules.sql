-- the relation the views of warehouse/sql/ read for the protocol version being read; {kind}: TABLE or TEMP TABLE
CREATE OR REPLACE {kind} scoring_rules (task_id VARCHAR, count_slack_tokens BIGINT)
