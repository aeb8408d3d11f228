-- The busy window of SCORING.md per pass and engine, as a sweep over the pass's events (the
-- definition in SQL, for analysts; the scorer computes the same numbers with numpy in
-- speculator_arena/scoring/busy.py because this sort over every chunk is slow at scale, and a
-- test checks that both agree). Every timed request occupies its lane from sent_at to its last
-- chunk (ended_at when it had none): +1 at its start, -1 at its end. Chunks of counted
-- requests are events that change nothing and carry their tokens. At equal times starts come
-- before chunks and chunks before ends, so the intervals are closed. A chunk counts when, after
-- its event, `lanes` requests are in flight; the window is the total length of the segments
-- between consecutive events in which `lanes` requests are in flight.
CREATE OR REPLACE VIEW pass_busy AS
WITH events AS (
    SELECT evaluation_id, pass_id, engine, lanes, sent_at AS t, 0 AS ord, 1 AS delta, 0 AS tokens
    FROM staged_requests WHERE sent_at IS NOT NULL
    UNION ALL
    SELECT evaluation_id, pass_id, engine, lanes, coalesce(last_token_at, ended_at) AS t, 2 AS ord, -1 AS delta, 0 AS tokens
    FROM staged_requests WHERE sent_at IS NOT NULL AND coalesce(last_token_at, ended_at) IS NOT NULL
    UNION ALL
    SELECT evaluation_id, pass_id, engine, lanes, unnest(chunk_times) AS t, 1 AS ord, 0 AS delta,
           unnest(chunk_tokens) AS tokens
    FROM staged_requests WHERE counted
),
swept AS (
    SELECT evaluation_id, pass_id, engine, lanes, t, delta, tokens,
           sum(delta) OVER (PARTITION BY evaluation_id, pass_id, engine ORDER BY t, ord
                            ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS in_flight,
           lead(t) OVER (PARTITION BY evaluation_id, pass_id, engine ORDER BY t, ord) AS t_next
    FROM events
)
SELECT evaluation_id, pass_id, engine,
       coalesce(sum(t_next - t) FILTER (WHERE in_flight >= lanes AND t_next IS NOT NULL), 0.0) AS busy_seconds,
       coalesce(sum(tokens) FILTER (WHERE delta = 0 AND in_flight >= lanes), 0) AS busy_tokens
FROM swept
GROUP BY ALL
