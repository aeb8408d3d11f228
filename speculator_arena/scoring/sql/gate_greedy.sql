-- Greedy agreement per probe prompt the stock engine answered: common prefix of the two replies'
-- token ids / the longer reply. `candidate_answered` false: the candidate left the prompt
-- unanswered (the scorer counts it at the worst value, a = 0, from protocol v2 on; v1 left it out).
-- Prompts whose both replies are empty are left out.
WITH c AS (SELECT * FROM raw_probe_greedy WHERE engine = 'candidate'),
     s AS (SELECT * FROM raw_probe_greedy WHERE engine = 'stock'),
j AS (
    SELECT s.evaluation_id, s.prompt_id, coalesce(c.answered, false) AS candidate_answered,
           CASE WHEN coalesce(c.answered, false) THEN c.token_ids ELSE [] END AS a, s.token_ids AS b
    FROM s LEFT JOIN c USING (evaluation_id, prompt_id)
    WHERE coalesce(s.answered, false)
      AND ($ids IS NULL OR list_contains($ids, s.evaluation_id))
)
SELECT evaluation_id, prompt_id, candidate_answered, len(a) AS len_candidate, len(b) AS len_stock,
       coalesce(list_position(list_transform(generate_series(1, least(len(a), len(b))), lambda i: a[i] = b[i]), false) - 1,
                least(len(a), len(b))) AS common_prefix
FROM j
WHERE greatest(len(a), len(b)) > 0 OR NOT candidate_answered
