-- Timed requests with their pass's bounds and whether each one counts (SCORING.md "Counted
-- requests", whose one home is speculator_arena/rules/counted.py; this states the same rule
-- over the same columns): the stream ended with [DONE], the arena's token count is within
-- max_tokens plus the protocol's count_slack_tokens (relation `scoring_rules`, per task, from the
-- protocol version being read), it was sent before the pass ended and ended by the grace end.
-- Warm-up rows never count.
CREATE OR REPLACE VIEW staged_requests AS
SELECT
    r.evaluation_id, r.pass_id, r.engine, r.workload, r.pass_index, r.request_id, r.lane,
    r.session_id, r.turn, r.sent_at, r.first_token_at, r.last_token_at, r.ended_at,
    r.prompt_tokens, r.usage_prompt_tokens, r.cached_tokens, r.output_tokens, r.max_tokens,
    r.done, r.error, r.chunk_times, r.chunk_tokens, len(r.chunk_times) AS chunks,
    p.lanes, p.started_at AS pass_started_at, p.ends_at AS pass_ends_at,
    p.grace_ends_at AS pass_grace_ends_at, p.status AS pass_status,
    coalesce(r.done AND r.output_tokens <= r.max_tokens + coalesce(k.count_slack_tokens, 0)
             AND r.sent_at < p.ends_at AND r.ended_at <= p.grace_ends_at, false) AS counted
FROM raw_requests AS r
JOIN raw_passes AS p USING (evaluation_id, pass_id, engine)
LEFT JOIN evaluation_rules AS k USING (evaluation_id)
WHERE r.pass_id NOT LIKE 'warmup%'
