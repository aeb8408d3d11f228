-- The A/A noise benchmark's composition-free view of each evaluation (benchmarks/aa_noise.py):
-- the same request (workload, pass, session, turn: the same prompt, seed and reply budget) served
-- by both engine starts, candidate time over stock time. Requests that both engines finished
-- with the same number of output tokens only, so that the ratio is of equal work. Per pass index:
-- under mirrored pairing (protocol v4's embedded task) pass 0 and pass 1 are served by different
-- starts, the candidate's first in pass 0 and the stock's first in pass 1.
-- $requests: the glob of the warehouse's raw request parts.
WITH r AS (
    SELECT evaluation_id, engine, workload, pass_id, pass_index, session_id, turn,
           output_tokens, last_token_at - sent_at AS seconds
    FROM read_parquet($requests, hive_partitioning = true, union_by_name = true)
    WHERE done AND pass_id NOT LIKE 'warmup%' AND last_token_at IS NOT NULL
)
SELECT c.evaluation_id, c.workload, c.pass_index,
       count(*) AS matched,
       exp(median(ln(c.seconds / s.seconds))) AS matched_time_ratio
FROM r AS c
JOIN r AS s USING (evaluation_id, workload, pass_id, pass_index, session_id, turn)
WHERE c.engine = 'candidate' AND s.engine = 'stock' AND c.output_tokens = s.output_tokens
  AND c.seconds > 0 AND s.seconds > 0
GROUP BY c.evaluation_id, c.workload, c.pass_index
ORDER BY c.evaluation_id, c.workload, c.pass_index
