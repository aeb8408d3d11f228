SELECT name FROM accounts WHERE account_id = ?
