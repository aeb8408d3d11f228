SELECT intake_status, fetch_owner FROM submissions WHERE submission_id = ?
