INSERT INTO tokens (token_id, account_id, secret_hash, created_at) VALUES (?, ?, ?, ?)
