-- A fetch that failed: refused with its reason and status code (the quota refunds it).
UPDATE submissions
SET intake_status = 'refused', intake_reason = :reason, intake_code = :code, fetch_owner = NULL
WHERE submission_id = :submission_id AND intake_status = 'fetching'
