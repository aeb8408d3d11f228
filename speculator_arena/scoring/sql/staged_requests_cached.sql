-- The scalar columns of the staged timed requests the scorer's queries use (pass_requests,
-- gate_length, figures_requests) and the chunk count, never the chunk lists ($ids: VARCHAR[] or
-- NULL for all). The scorer builds the same rows, in this column order and these types, in its
-- Parquet scan (scoring/busy_scan.py STAGED; tests/scoring/test_busy_scan.py compares them) and
-- runs this only for the evaluations the scan hands back; `staged_requests` then points at both.
CREATE OR REPLACE TEMP TABLE cached_staged_requests AS
SELECT evaluation_id, pass_id, engine, workload, session_id, turn, sent_at, first_token_at, last_token_at,
       ended_at, usage_prompt_tokens, cached_tokens, output_tokens, chunks, counted
FROM staged_requests
WHERE $ids IS NULL OR list_contains($ids, evaluation_id)
