-- one pack's rows of the resolved evaluations (the ids: a relation registered on the
-- connection), joined by name to the schema's typed empty rows, so that a pack written before a
-- column was added reads it as NULL
SELECT {columns} FROM (
    {empty}
    UNION ALL BY NAME
    SELECT * FROM read_parquet({path}) WHERE evaluation_id IN (SELECT evaluation_id FROM {ids})
)
