SELECT 1 FROM accounts WHERE name = ?
