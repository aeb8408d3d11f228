-- Per evaluation: generated tokens of both engines over the items both answered (dL's sums).
SELECT evaluation_id, sum(candidate_tokens) AS candidate_tokens, sum(stock_tokens) AS stock_tokens, count(*) AS pairs
FROM item_pairs
WHERE candidate_tokens IS NOT NULL AND stock_tokens IS NOT NULL
GROUP BY ALL
ORDER BY ALL
