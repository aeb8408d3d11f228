-- Each account's last evaluation per task and split (by created_at): the one the board ranks.
-- Scores are not stored; the board joins this with score_warehouse() output.
CREATE OR REPLACE VIEW board_latest AS
SELECT * EXCLUDE (rn) FROM (
    SELECT e.*, row_number() OVER (PARTITION BY task_id, split, account_id, is_reference,
                                   CASE WHEN is_reference THEN label END
                                   ORDER BY created_at DESC, evaluation_id DESC) AS rn
    FROM raw_evaluations AS e
)
WHERE rn = 1
