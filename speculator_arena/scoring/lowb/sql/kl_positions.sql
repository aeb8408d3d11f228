-- Every KL probe position both engines answered (the prompt answered by both, a row of each at the
-- position): the stock's and the candidate's top-k and the prompt token's log-probability.
WITH answered AS (
    SELECT evaluation_id, prompt_id
    FROM raw_lowb_kl_prompts
    GROUP BY ALL
    HAVING count(*) FILTER (WHERE engine = 'stock' AND answered) > 0
       AND count(*) FILTER (WHERE engine = 'candidate' AND answered) > 0
)
SELECT s.evaluation_id, s.prompt_id, s.position, s.token_id,
       s.token_logprob AS p_token_logprob, s.top_ids AS p_ids, s.top_logprobs AS p_logprobs,
       c.token_logprob AS q_token_logprob, c.top_ids AS q_ids, c.top_logprobs AS q_logprobs
FROM raw_lowb_logprobs s
JOIN answered a ON a.evaluation_id = s.evaluation_id AND a.prompt_id = s.prompt_id
JOIN raw_lowb_logprobs c
  ON c.evaluation_id = s.evaluation_id AND c.prompt_id = s.prompt_id AND c.position = s.position
 AND c.engine = 'candidate'
WHERE s.engine = 'stock'
ORDER BY s.evaluation_id, s.prompt_id, s.position
