SELECT * FROM submissions WHERE submission_id = ? AND account_id = ?
