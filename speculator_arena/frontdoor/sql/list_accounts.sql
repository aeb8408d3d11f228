SELECT account_id, name, kind, created_at, revoked_at FROM accounts ORDER BY created_at
