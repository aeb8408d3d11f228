-- Both speeds of every pass and engine, from the two views before it.
CREATE OR REPLACE VIEW pass_speeds AS
SELECT r.*, b.busy_seconds, b.busy_tokens,
       CASE WHEN b.busy_seconds > 0 THEN b.busy_tokens / b.busy_seconds END AS busy_window_speed
FROM pass_requests AS r
LEFT JOIN pass_busy AS b USING (evaluation_id, pass_id, engine)
