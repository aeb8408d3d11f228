-- Throughput against interactivity: each engine's busy window (SCORING.md; the warehouse's view
-- pass_busy) pooled over a workload's passes. Throughput = busy tokens / busy seconds (tokens per
-- second while every lane is in flight); per-user speed = throughput / lanes. $1 evaluation ids.
SELECT p.evaluation_id, p.engine, p.workload, max(p.lanes) AS lanes,
       sum(b.busy_tokens) AS busy_tokens, sum(b.busy_seconds) AS busy_seconds,
       sum(b.busy_tokens) / nullif(sum(b.busy_seconds), 0) AS throughput,
       sum(b.busy_tokens) / nullif(sum(b.busy_seconds), 0) / max(p.lanes) AS per_user
FROM raw_passes AS p
LEFT JOIN pass_busy AS b USING (evaluation_id, pass_id, engine)
WHERE list_contains($1, p.evaluation_id) AND p.pass_id NOT LIKE 'warmup%' AND p.status = 'complete'
GROUP BY ALL
