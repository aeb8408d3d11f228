-- The scorer's in-memory connection (scoring/connection.py): Parquet footers read once per
-- connection, and no progress bar on a server's stderr. Threads are set when connecting
-- (ARENA_DUCKDB_THREADS).
SET parquet_metadata_cache = true;
SET enable_progress_bar = false;
