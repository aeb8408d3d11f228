SELECT value FROM settings WHERE key = ?
