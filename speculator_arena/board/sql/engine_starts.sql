-- Each engine start of one evaluation. The start-up log is returned only for dev evaluations:
-- a test evaluation's engine saw hidden prompts, and its log could repeat them.
-- $1 evaluation_id.
SELECT s.engine, s.purpose, s.start_index, s.started_at, s.healthy_at, s.stopped_at,
       s.exit_code, s.stop_signal, s.run_as_user, s.unprivileged, s.offload_detected,
       s.offload_evidence, s.died, s.device_idle_seconds, s.device_idle_ok,
       CASE WHEN e.split = 'dev' THEN s.log_text ELSE NULL END AS log_text
FROM raw_engine_starts s
JOIN raw_evaluations e USING (evaluation_id)
WHERE s.evaluation_id = $1
ORDER BY s.started_at NULLS LAST, s.engine, s.start_index
