-- rows copied into one table of the analysts' file
SELECT count(*) FROM raw_{table}
