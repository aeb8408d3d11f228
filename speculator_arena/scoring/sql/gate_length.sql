-- Length pairs summed per evaluation: requests both engines answered and counted, matched on
-- (workload, pass, session, turn), pooled over workloads. Sums for the delta method, and the stock
-- engine's counted requests (too few pairs where the stock engine counted enough is the candidate's failure).
WITH c AS (SELECT * FROM staged_requests WHERE engine = 'candidate' AND counted),
     s AS (SELECT * FROM staged_requests WHERE engine = 'stock' AND counted
           AND ($ids IS NULL OR list_contains($ids, evaluation_id)))
SELECT s.evaluation_id, count(c.output_tokens) AS pairs, count(*) AS stock_counted,
       sum(c.output_tokens)::DOUBLE AS sum_c,
       sum(s.output_tokens) FILTER (WHERE c.output_tokens IS NOT NULL)::DOUBLE AS sum_s,
       sum(c.output_tokens::DOUBLE * c.output_tokens) AS sum_cc,
       sum(s.output_tokens::DOUBLE * s.output_tokens) FILTER (WHERE c.output_tokens IS NOT NULL) AS sum_ss,
       sum(c.output_tokens::DOUBLE * s.output_tokens) AS sum_cs
FROM s LEFT JOIN c USING (evaluation_id, workload, pass_id, session_id, turn)
GROUP BY s.evaluation_id
