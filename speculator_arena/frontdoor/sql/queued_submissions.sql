-- Accepted submissions, oldest first (the queue's order).
SELECT * FROM submissions ORDER BY accepted_at, submission_id
