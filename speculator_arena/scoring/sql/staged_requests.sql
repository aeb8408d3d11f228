-- `staged_requests` for every query that follows the busy-window scan (scoring/rows.py): the
-- scan's rows (`staged_scan`, an Arrow table DuckDB reads in place) after the SQL view's rows of
-- the evaluations the scan handed back (`cached_staged_requests`, sql/staged_requests_cached.sql).
-- Either may have no rows; both have the columns and types of busy_scan.STAGED.
CREATE OR REPLACE TEMP VIEW staged_requests AS
SELECT * FROM cached_staged_requests
UNION ALL
SELECT * FROM staged_scan
