-- The fetch worker of one API process takes a submission to fetch.
UPDATE submissions SET fetch_owner = :owner, fetch_started = :now
WHERE submission_id = :submission_id AND intake_status = 'fetching'
