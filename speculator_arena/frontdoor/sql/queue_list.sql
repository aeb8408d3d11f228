-- the submissions as `arena queue list` shows them (their evaluations' status is read from the warehouse)
SELECT submission_id, evaluation_id, account_id, task_id, split, accepted_at, intake_status
FROM submissions ORDER BY accepted_at
