UPDATE tokens SET revoked_at = ? WHERE account_id = ? AND revoked_at IS NULL
