-- Every stored evaluations row of the evaluations scored, oldest first (a repeated id keeps
-- its current row, rules/status.py: scoring/rows.py drops the others).
SELECT * FROM raw_evaluations
WHERE $ids IS NULL OR list_contains($ids, evaluation_id)
ORDER BY created_at, evaluation_id
