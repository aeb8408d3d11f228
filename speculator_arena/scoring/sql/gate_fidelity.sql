-- Target fidelity per fixed text the stock engine answered: sum of |lp_candidate - lp_stock| over
-- its tokens, their count and the largest per-token difference. Token positions are the arena's
-- (both rows hold the arena's tokenization of the text). `candidate_answered` false: the candidate
-- left the text unanswered (the scorer counts its tokens at the worst value from protocol v2 on);
-- `aligned` false: the rows' token ids differ (rows stored before the arena tokenized them).
WITH c AS (SELECT * FROM raw_probe_fidelity WHERE engine = 'candidate'),
     s AS (SELECT * FROM raw_probe_fidelity WHERE engine = 'stock' AND coalesce(answered, false))
SELECT s.evaluation_id, s.text_id, coalesce(c.answered, false) AS candidate_answered,
       coalesce(c.answered, false) AND c.token_ids = s.token_ids
           AND len(c.token_logprobs) = len(s.token_logprobs) AS aligned,
       CASE WHEN coalesce(c.answered, false) THEN
           list_sum(list_transform(list_zip(c.token_logprobs, s.token_logprobs), lambda p: abs(p[1] - p[2]))) END AS abs_diff,
       CASE WHEN coalesce(c.answered, false) THEN
           list_max(list_transform(list_zip(c.token_logprobs, s.token_logprobs), lambda p: abs(p[1] - p[2]))) END AS max_diff,
       len(s.token_logprobs) AS n
FROM s LEFT JOIN c USING (evaluation_id, text_id)
WHERE $ids IS NULL OR list_contains($ids, s.evaluation_id)
