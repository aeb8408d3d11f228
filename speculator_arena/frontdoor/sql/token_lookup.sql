-- A token's stored hash and its account, both still valid.
SELECT t.secret_hash, a.account_id, a.name, a.kind
FROM tokens t JOIN accounts a ON a.account_id = t.account_id
WHERE t.token_id = ? AND t.revoked_at IS NULL AND a.revoked_at IS NULL
