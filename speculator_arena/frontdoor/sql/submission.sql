SELECT * FROM submissions WHERE submission_id = ?
