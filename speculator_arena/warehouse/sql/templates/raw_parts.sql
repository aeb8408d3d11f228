-- raw_<table>: every column of the table's schema from Parquet parts (a glob or a list of files).
-- The typed empty rows first, joined by name: a column the schema gained after some parts were
-- written (e.g. contention.foreign_top) reads as NULL from those parts instead of failing the view.
-- The columns, the empty rows and the paths are formatted in by warehouse/store.py from the
-- schema and the home: never user input.
SELECT {columns} FROM (
    {empty}
    UNION ALL BY NAME
    SELECT * FROM read_parquet({paths}, hive_partitioning = true, union_by_name = true)
)
