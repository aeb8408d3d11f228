-- The rescore benchmark's baseline (benchmarks/score_benchmark.py): a bare DuckDB scan that
-- reads the request columns the scorer reads (the chunk lists included) and aggregates them
-- per evaluation, pass and engine, from the view `bare_requests` (the same rows the scorer
-- reads: the packs where current, else the parts). What no scoring can beat by much: the cost
-- of decoding the rows once.
SELECT
    evaluation_id,
    pass_id,
    engine,
    count(*) AS requests,
    count_if(done) AS done,
    sum(output_tokens) AS output_tokens,
    sum(max_tokens) AS max_tokens,
    min(sent_at) AS first_sent,
    max(last_token_at) AS last_token,
    max(ended_at) AS last_end,
    sum(len(chunk_times)) AS chunks,
    max(list_max(chunk_times)) AS last_chunk,
    sum(list_sum(chunk_tokens)) AS chunk_tokens
FROM bare_requests
GROUP BY ALL
