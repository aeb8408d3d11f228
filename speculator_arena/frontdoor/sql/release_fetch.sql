-- A fetch stopped with its API process (shutdown): the submission waits for the next fetch worker.
UPDATE submissions SET fetch_owner = NULL, fetch_started = NULL
WHERE submission_id = :submission_id AND fetch_owner = :owner AND intake_status = 'fetching'
