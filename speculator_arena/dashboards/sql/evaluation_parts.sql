-- The evaluation rows of the given part files ($files), for the board's memo of the index:
-- only parts that are new or changed since it last looked are read. Same columns as
-- evaluations_index.sql; no text column.
SELECT evaluation_id, task_id, split, protocol_version, submission_id, account_id,
       coalesce(is_reference, false) AS is_reference, label, solution_kind, status,
       void_reason, failure_reason, created_at, updated_at
FROM read_parquet($files, hive_partitioning = true, union_by_name = true)
