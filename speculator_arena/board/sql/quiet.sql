-- no progress bar: DuckDB draws one on stdout for long scans, into a server's log
SET enable_progress_bar = false
