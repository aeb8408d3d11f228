-- Accepted submissions (sealed whole), oldest first (the queue's order); fetching and refused
-- ones never run.
SELECT * FROM submissions WHERE intake_status = 'accepted' ORDER BY accepted_at, submission_id
