-- the table analyst_columns of the analysts' file: how each raw column was copied
CREATE TABLE analyst_columns (table_name VARCHAR, column_name VARCHAR, copied VARCHAR)
