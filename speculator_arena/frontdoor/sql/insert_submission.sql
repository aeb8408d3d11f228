INSERT INTO submissions (submission_id, evaluation_id, account_id, task_id, split, protocol_version,
                         solution_kind, solution_method, engine_source, engine_digest, engine_dir,
                         speculator_source, speculator_digest, speculator_dir, accepted_at,
                         intake_status, fetch_spec, artifact_source, artifact_digest, artifact_dir)
VALUES (:submission_id, :evaluation_id, :account_id, :task_id, :split, :protocol_version,
        :solution_kind, :solution_method, :engine_source, :engine_digest, :engine_dir,
        :speculator_source, :speculator_digest, :speculator_dir, :accepted_at,
        :intake_status, :fetch_spec, :artifact_source, :artifact_digest, :artifact_dir)
