-- write a database file's WAL into the file before it is renamed into place
CHECKPOINT
