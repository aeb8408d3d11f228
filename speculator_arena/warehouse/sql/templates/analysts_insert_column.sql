-- one row of analyst_columns (table, column, copied), values bound as parameters
INSERT INTO analyst_columns VALUES (?, ?, ?)
