-- Per evaluation, engine and workload, the sums the throughput axis divides (scoring/lowb/throughput.py):
-- tokens of the ok requests, the passes' wall seconds (each pass: last finished_at less first sent_at
-- of its requests), the interactive time per output token's two sums, and the failed requests.
WITH per_pass AS (
    SELECT evaluation_id, engine, workload, pass_index,
           max(finished_at) - min(sent_at) AS pass_seconds,
           sum(output_tokens) FILTER (WHERE ok) AS ok_tokens,
           sum(finished_at - first_token_at) FILTER (WHERE ok) AS decode_seconds,
           sum(output_tokens - 1) FILTER (WHERE ok) AS decode_tokens,
           count(*) FILTER (WHERE NOT coalesce(ok, false)) AS failed,
           count(*) FILTER (WHERE ok) AS ok_requests
    FROM raw_lowb_requests
    GROUP BY ALL
)
SELECT evaluation_id, engine, workload,
       sum(ok_tokens) AS ok_tokens,
       sum(pass_seconds) AS pass_seconds,
       sum(decode_seconds) AS decode_seconds,
       sum(decode_tokens) AS decode_tokens,
       sum(failed) AS failed,
       sum(ok_requests) AS ok_requests
FROM per_pass
GROUP BY ALL
ORDER BY ALL
