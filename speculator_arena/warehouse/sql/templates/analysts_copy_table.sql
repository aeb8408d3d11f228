-- one raw table of the analysts' file: its allowed columns (analysts.py ALLOWLIST) over the raw rows
CREATE TABLE raw_{table} AS SELECT {columns} FROM ({select}) AS r
