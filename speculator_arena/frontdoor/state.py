"""The front door's SQLite database: `$ARENA_HOME/frontdoor/state.db`.

Why SQLite and not the warehouse: accounts, token hashes, submissions and quota use are
operational state, written by several API worker processes and read by the Dagster sensor at
the same time, and a quota must be counted and spent in one atomic step. SQLite (stdlib, WAL
journal) gives exactly that: `BEGIN IMMEDIATE` takes the database's write lock before the count
is read, so two submissions racing for an account's last slot are serialized and only one is
inserted; WAL lets status readers read while one writer writes. The warehouse (append-only
Parquet, DuckDB views) is for measurements and has no such transaction.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path

from speculator_arena import sqlfiles
from speculator_arena.settings import arena_home

BUSY_TIMEOUT_S = 30.0


def sql(name: str) -> str:
    return sqlfiles.read("speculator_arena.frontdoor", f"{name}.sql")


def frontdoor_dir(home=None) -> Path:
    """`$ARENA_HOME/frontdoor`, made 0711: the intake's children pass through it to their
    sandboxes (staging/) but cannot list it, and the database in it is the API user's alone."""
    d = arena_home(home) / "frontdoor"
    if not d.is_dir():
        d.parent.mkdir(parents=True, exist_ok=True)
        d.mkdir(mode=0o711, exist_ok=True)
        os.chmod(d, 0o711)
    return d


def staging_dir(home=None) -> Path:
    """Where the intake's children work: under ARENA_HOME like the sealed store, so a tree moves
    into the store by an atomic rename. Others may pass through it to their own sandbox (mode
    0711) but not list it."""
    d = frontdoor_dir(home) / "staging"
    if not d.is_dir():
        d.mkdir(mode=0o711, exist_ok=True)
        os.chmod(d, 0o711)
    return d


def connect(home=None) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit: see `transaction`)."""
    path = frontdoor_dir(home) / "state.db"
    if not path.exists():  # SQLite gives the WAL and shared-memory files the database's mode
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    con = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    con.row_factory = sqlite3.Row
    con.executescript(sql("connection"))
    con.executescript(sql("schema"))
    columns = {r["name"] for r in con.execute(sql("submission_columns"))}
    if "intake_status" not in columns:
        con.executescript(sql("migrate_intake"))  # a database made before fetches left the request
    if "artifact_digest" not in columns:
        con.executescript(sql("migrate_artifact"))  # a database made before LowBArena's submissions
    return con


_WRITERS = threading.Lock()  # this process's writers, in turn


@contextmanager
def transaction(con: sqlite3.Connection):
    """`BEGIN IMMEDIATE` ... COMMIT (ROLLBACK on any exception).

    The threads of one process take turns on a lock first: SQLite's own wait for its write lock
    polls with growing sleeps, so a burst of requests in one API process would spend most of its
    time asleep; other processes still wait on SQLite's lock."""
    with _WRITERS:
        con.execute(sql("begin_immediate"))
        try:
            yield con
        except BaseException:
            con.execute(sql("rollback"))
            raise
        con.execute(sql("commit"))


def get_setting(con: sqlite3.Connection, key: str, default: str | None = None) -> str | None:
    row = con.execute(sql("get_setting"), (key,)).fetchone()
    return row["value"] if row else default


def set_setting(con: sqlite3.Connection, key: str, value: str) -> None:
    con.execute(
        sql("set_setting"),
        (key, value),
    )
