-- Sealed digests a submission that is not refused names (what the store must keep).
SELECT engine_digest FROM submissions WHERE intake_status != 'refused' AND engine_digest != ''
UNION
SELECT speculator_digest FROM submissions WHERE intake_status != 'refused' AND speculator_digest IS NOT NULL
UNION
SELECT artifact_digest FROM submissions WHERE intake_status != 'refused' AND artifact_digest IS NOT NULL
