-- The analysts' copy of raw_metrics.labels: every label of a dev evaluation; of any other
-- evaluation only the draft position of a per-position counter, rewritten as {"position": "<n>"}
-- from the integer read (macro spec_decode_position), so no text an engine wrote is copied.
CASE
    WHEN r.evaluation_id IN (SELECT evaluation_id FROM _dev_evaluations) THEN r.labels
    WHEN spec_decode_counter(r.name) = 'accepted_tokens_per_pos' AND spec_decode_position(r.labels) IS NOT NULL
        THEN json_object('position', CAST(spec_decode_position(r.labels) AS VARCHAR))::VARCHAR
END
