-- The evaluations an account's accepted submissions started for one task and split (quota use).
SELECT evaluation_id FROM submissions WHERE account_id = ? AND task_id = ? AND split = ?
