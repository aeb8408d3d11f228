-- Older databases: the intake's status and the fetch worker's claim (schema.sql has them).
ALTER TABLE submissions ADD COLUMN intake_status TEXT NOT NULL DEFAULT 'accepted';
ALTER TABLE submissions ADD COLUMN intake_reason TEXT;
ALTER TABLE submissions ADD COLUMN intake_code INTEGER;
ALTER TABLE submissions ADD COLUMN fetch_spec TEXT;
ALTER TABLE submissions ADD COLUMN fetch_owner TEXT;
ALTER TABLE submissions ADD COLUMN fetch_started REAL;
