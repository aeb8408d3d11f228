-- Per pass and engine, what its timed requests sum to: requests, counted ones, failures, counted
-- output tokens and the counted requests' seconds from sent to last token (SCORING.md's
-- request-time speed is their quotient, view pass_requests). A view of its own because these
-- are the per-request work the scorer keeps in its request store (scoring/request_store.py):
-- the scorer's connection replaces it with the stored and freshly computed rows.
-- The seconds are summed exactly, each rounded to the picosecond (DECIMAL(38, 12)): a sum of
-- doubles depends in its last bits on the order of its terms, and DuckDB's threads hand rows
-- over in varying order; sorting the terms instead cost a second per 1,000 evaluations.
CREATE OR REPLACE VIEW pass_request_sums AS
SELECT evaluation_id, pass_id, engine,
       count(*) AS requests,
       count(*) FILTER (WHERE counted) AS counted,
       count(*) FILTER (WHERE NOT counted) AS failures,
       sum(output_tokens) FILTER (WHERE counted) AS counted_tokens,
       sum((last_token_at - sent_at)::DECIMAL(38, 12)) FILTER (WHERE counted)::DOUBLE AS request_seconds
FROM staged_requests
GROUP BY ALL
