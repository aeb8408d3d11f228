-- Greedy agreement per probe prompt: common prefix / the longer reply; both empty: left out.
WITH c AS (SELECT * FROM raw_probe_greedy WHERE engine = 'candidate'),
     s AS (SELECT * FROM raw_probe_greedy WHERE engine = 'stock'),
j AS (
    SELECT c.evaluation_id, c.prompt_id, c.token_ids AS a, s.token_ids AS b
    FROM c JOIN s USING (evaluation_id, prompt_id)
    WHERE coalesce(c.answered, false) AND coalesce(s.answered, false)
      AND ($ids IS NULL OR list_contains($ids, c.evaluation_id))
)
SELECT evaluation_id, prompt_id, len(a) AS len_candidate, len(b) AS len_stock,
       coalesce(list_position(list_transform(generate_series(1, least(len(a), len(b))), lambda i: a[i] = b[i]), false) - 1,
                least(len(a), len(b))) AS common_prefix
FROM j
WHERE greatest(len(a), len(b)) > 0
