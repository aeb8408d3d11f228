INSERT INTO accounts (account_id, name, kind, created_at) VALUES (?, ?, ?, ?)
