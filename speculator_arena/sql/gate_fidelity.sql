-- Target fidelity per fixed text: sum of |lp_candidate - lp_stock| over its tokens, and its
-- token count; texts whose token ids differ between the engines are reported, not pooled.
WITH c AS (SELECT * FROM raw_probe_fidelity WHERE engine = 'candidate' AND coalesce(answered, false)),
     s AS (SELECT * FROM raw_probe_fidelity WHERE engine = 'stock' AND coalesce(answered, false))
SELECT c.evaluation_id, c.text_id,
       c.token_ids = s.token_ids AND len(c.token_logprobs) = len(s.token_logprobs) AS aligned,
       list_sum(list_transform(list_zip(c.token_logprobs, s.token_logprobs), lambda p: abs(p[1] - p[2]))) AS abs_diff,
       len(c.token_logprobs) AS n
FROM c JOIN s USING (evaluation_id, text_id)
WHERE $ids IS NULL OR list_contains($ids, c.evaluation_id)
