-- Every evaluation's identity and status, newest first: the board's choice of what to score
-- and the evaluation page's select box. Reads the raw evaluations Parquet directly ($glob)
-- rather than the raw_evaluations view, because binding every raw_* view reads every part's
-- footer of every table, which is most of the first render's time once the warehouse holds
-- thousands of evaluations (docs/benchmarks/board.md). Columns are named, never `*`, and no
-- text column of any evaluation is read.
SELECT evaluation_id, task_id, split, protocol_version, submission_id, account_id,
       coalesce(is_reference, false) AS is_reference, label, solution_kind, status,
       void_reason, failure_reason, created_at, updated_at
FROM read_parquet($glob, hive_partitioning = true, union_by_name = $union_by_name)
ORDER BY created_at DESC NULLS LAST, evaluation_id
