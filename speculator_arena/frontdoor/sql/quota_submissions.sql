-- The evaluations an account's submissions started for one task and split (quota use): a
-- submission still fetching counts, one whose fetch failed (refused) is refunded.
SELECT evaluation_id, intake_status FROM submissions
WHERE account_id = ? AND task_id = ? AND split = ? AND intake_status != 'refused'
