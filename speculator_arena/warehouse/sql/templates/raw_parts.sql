-- raw_<table>: every column of the table's schema from Parquet parts (a glob or a list of files).
-- {columns} and {paths} are formatted by warehouse/templates.py from the schema and the home: never user input.
SELECT {columns} FROM read_parquet({paths}, hive_partitioning = true, union_by_name = true)
