-- The LowBArena scoring benchmark's baseline (benchmarks/lowb_scoring.py): a bare DuckDB scan that
-- reads every column of the LowBArena raw tables the scorer reads (the logprob lists included) and
-- aggregates each per evaluation and engine. What no scoring can beat by much: decoding the rows once.
-- {root} is the warehouse's raw folder, formatted in by the benchmark (its own path).
SELECT 'requests' AS t, evaluation_id, engine, count(*) AS n, sum(output_tokens) + sum(finished_at - sent_at)
       + sum(first_token_at) + count_if(ok) AS x
FROM read_parquet('{root}/lowb_requests/*/*.parquet', hive_partitioning = true) GROUP BY ALL
UNION ALL
SELECT 'memory', evaluation_id, engine, count(*), sum(bytes) + sum(sampled_at)
FROM read_parquet('{root}/lowb_memory/*/*.parquet', hive_partitioning = true) GROUP BY ALL
UNION ALL
SELECT 'items', evaluation_id, engine, count(*), sum(score) + sum(output_tokens)
FROM read_parquet('{root}/lowb_items/*/*.parquet', hive_partitioning = true) GROUP BY ALL
UNION ALL
SELECT 'kl_prompts', evaluation_id, engine, count(*), count_if(answered)
FROM read_parquet('{root}/lowb_kl_prompts/*/*.parquet', hive_partitioning = true) GROUP BY ALL
UNION ALL
SELECT 'logprobs', evaluation_id, engine, count(*), sum(token_logprob) + sum(list_sum(top_logprobs)) + sum(list_sum(top_ids))
FROM read_parquet('{root}/lowb_logprobs/*/*.parquet', hive_partitioning = true) GROUP BY ALL
UNION ALL
SELECT 'tensors', evaluation_id, engine, count(*), sum(bytes) + sum(length(tensor) + length(dtype) + length(shape))
FROM read_parquet('{root}/lowb_tensors/*/*.parquet', hive_partitioning = true) GROUP BY ALL
UNION ALL
SELECT 'checkpoints', evaluation_id, engine, count(*), sum(length(declared_method))
FROM read_parquet('{root}/lowb_checkpoints/*/*.parquet', hive_partitioning = true) GROUP BY ALL
UNION ALL
SELECT 'starts', evaluation_id, engine, count(*), sum(stopped_at - healthy_at) + count_if(unprivileged)
FROM read_parquet('{root}/engine_starts/*/*.parquet', hive_partitioning = true) GROUP BY ALL
UNION ALL
SELECT 'evaluations', evaluation_id, task_id, count(*), max(updated_at)
FROM read_parquet('{root}/evaluations/*/*.parquet', hive_partitioning = true) GROUP BY ALL
