-- Timed wall time per engine (first pass start to last pass finish, summed per pass) for
-- ADR-0009's output tokens per second; passes not complete are counted so the caller blanks.
-- A sum (or mean) of doubles adds its terms in the order of their values (ORDER BY the term):
-- its last bits depend on that order, and DuckDB's threads hand rows over in varying order.
SELECT evaluation_id, engine, count(*) AS passes,
       count(*) FILTER (WHERE status <> 'complete' OR finished_at IS NULL) AS passes_incomplete,
       sum(finished_at - started_at ORDER BY finished_at - started_at) AS wall_seconds
FROM raw_passes
WHERE pass_id NOT LIKE 'warmup%' AND ($ids IS NULL OR list_contains($ids, evaluation_id))
GROUP BY ALL
