-- Per evaluation: the KL probe's prompts (of either engine) and how many the candidate left unanswered.
WITH per_prompt AS (
    SELECT evaluation_id, prompt_id,
           bool_or(engine = 'candidate' AND coalesce(answered, false)) AS candidate_answered
    FROM raw_lowb_kl_prompts
    GROUP BY ALL
)
SELECT evaluation_id, count(*) AS prompts, count(*) FILTER (WHERE NOT candidate_answered) AS unanswered
FROM per_prompt
GROUP BY ALL
ORDER BY ALL
