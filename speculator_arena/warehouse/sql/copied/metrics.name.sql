-- The analysts' copy of raw_metrics.name: every name of a dev evaluation; of any other
-- evaluation only the names of the engine's speculative-decoding counters (macro
-- spec_decode_counter), which are the arena's own words, never text an engine chose.
CASE
    WHEN r.evaluation_id IN (SELECT evaluation_id FROM _dev_evaluations) THEN r.name
    WHEN spec_decode_counter(r.name) IS NOT NULL THEN r.name
END
