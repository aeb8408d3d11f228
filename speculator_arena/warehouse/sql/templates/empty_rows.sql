-- a table with no rows yet: its schema's columns, typed, and no rows ({columns} are typed NULLs)
SELECT {columns} WHERE false
