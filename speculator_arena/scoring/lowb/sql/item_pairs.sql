-- Each accuracy item both engines have a row for, in the same run: the paired drop in points
-- (stock's score less the candidate's, x 100; a candidate's unanswered item scores 0, the stock's
-- leaves the pair out) and both engines' generated tokens (null when either did not answer).
SELECT s.evaluation_id, s.domain, s.run_index, s.item_id,
       100.0 * (s.score - coalesce(c.score, 0.0)) AS d,
       s.output_tokens AS stock_tokens,
       c.output_tokens AS candidate_tokens
FROM raw_lowb_items s
JOIN raw_lowb_items c
  ON c.evaluation_id = s.evaluation_id AND c.run_index = s.run_index AND c.item_id = s.item_id
WHERE s.engine = 'stock' AND c.engine = 'candidate'
ORDER BY s.evaluation_id, s.domain, s.run_index, s.item_id
