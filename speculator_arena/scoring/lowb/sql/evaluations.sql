-- Every stored evaluations row of the evaluations asked for ($ids NULL: all); the caller keeps each
-- evaluation's current row (rules/status.py) and, of those, the measured LowBArena ones.
SELECT evaluation_id, task_id, split, label, account_id, is_reference, solution_kind, status, created_at, updated_at
FROM raw_evaluations
WHERE $ids IS NULL OR list_contains($ids, evaluation_id)
ORDER BY created_at, evaluation_id
