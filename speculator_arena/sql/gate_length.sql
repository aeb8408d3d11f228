-- Length pairs summed per evaluation: requests both engines answered and counted, matched on
-- (workload, pass, session, turn), pooled over workloads. Sums for the delta method.
WITH c AS (SELECT * FROM staged_requests WHERE engine = 'candidate' AND counted),
     s AS (SELECT * FROM staged_requests WHERE engine = 'stock' AND counted)
SELECT c.evaluation_id, count(*) AS pairs,
       sum(c.output_tokens)::DOUBLE AS sum_c, sum(s.output_tokens)::DOUBLE AS sum_s,
       sum(c.output_tokens::DOUBLE * c.output_tokens) AS sum_cc,
       sum(s.output_tokens::DOUBLE * s.output_tokens) AS sum_ss,
       sum(c.output_tokens::DOUBLE * s.output_tokens) AS sum_cs
FROM c JOIN s USING (evaluation_id, workload, pass_id, session_id, turn)
WHERE $ids IS NULL OR list_contains($ids, c.evaluation_id)
GROUP BY c.evaluation_id
