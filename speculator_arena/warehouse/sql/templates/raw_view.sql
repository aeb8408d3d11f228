-- the view raw_<table> over what raw_parts.sql (or empty_rows.sql) selects; {kind} is VIEW or TEMPORARY VIEW
CREATE OR REPLACE {kind} raw_{table} AS {select}
