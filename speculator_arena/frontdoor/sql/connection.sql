-- every connection: WAL (readers read while one writer writes), durable commits, foreign keys
PRAGMA journal_mode=WAL;
PRAGMA synchronous=FULL;
PRAGMA foreign_keys=ON;
