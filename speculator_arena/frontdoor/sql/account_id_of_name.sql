SELECT account_id FROM accounts WHERE name = ?
