-- the analysts' file: the dev-split evaluations, whose DEV columns are copied whole (from the
-- evaluations table's raw rows)
CREATE TEMPORARY TABLE _dev_evaluations AS SELECT DISTINCT evaluation_id FROM ({evaluations}) WHERE split = 'dev'
