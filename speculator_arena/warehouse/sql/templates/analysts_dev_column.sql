-- a DEV column of the analysts' file: the value for a dev-split evaluation, else NULL
CASE WHEN r.evaluation_id IN (SELECT evaluation_id FROM _dev_evaluations) THEN r."{column}" END AS "{column}"
