-- A fetch that succeeded: the row is the queue's, with its sealed digests.
UPDATE submissions
SET intake_status = 'accepted', engine_digest = :engine_digest, engine_dir = :engine_dir,
    speculator_digest = :speculator_digest, speculator_dir = :speculator_dir,
    artifact_digest = :artifact_digest, artifact_dir = :artifact_dir,
    fetch_owner = NULL
WHERE submission_id = :submission_id AND intake_status = 'fetching'
