-- The candidate's checkpoint as declared (W, A, KV shown; a declared method is the relabelling test's).
SELECT evaluation_id, any_value(declared_method) AS declared_method, any_value(declared_weights) AS declared_weights,
       any_value(declared_activations) AS declared_activations, any_value(declared_kv) AS declared_kv,
       count(*) AS rows
FROM raw_lowb_checkpoints
WHERE engine = 'candidate'
GROUP BY ALL
ORDER BY ALL
