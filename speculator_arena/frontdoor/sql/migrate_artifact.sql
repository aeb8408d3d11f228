-- Older databases: LowBArena's quantized checkpoint (schema.sql has these columns).
ALTER TABLE submissions ADD COLUMN artifact_source TEXT;
ALTER TABLE submissions ADD COLUMN artifact_digest TEXT;
ALTER TABLE submissions ADD COLUMN artifact_dir TEXT;
