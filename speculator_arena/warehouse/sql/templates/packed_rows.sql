-- one pack's rows of the resolved evaluations ({ids}: a relation registered on the connection)
SELECT {columns} FROM read_parquet({path}) WHERE evaluation_id IN (SELECT evaluation_id FROM {ids})
