INSERT INTO registrations (account_id, client, created_at) VALUES (?, ?, ?)
