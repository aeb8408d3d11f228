-- Submissions still to fetch, oldest first (the fetch worker's order), with their claims.
SELECT submission_id, account_id, fetch_owner, fetch_started FROM submissions
WHERE intake_status = 'fetching' ORDER BY accepted_at, submission_id
