-- evaluations of the analysts' file whose DEV columns were withheld (not the dev split)
SELECT count(*) FROM raw_evaluations WHERE split <> 'dev'
