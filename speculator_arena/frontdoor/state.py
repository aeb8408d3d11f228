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

import sqlite3
from contextlib import contextmanager
from pathlib import Path

from speculator_arena import sqlfiles
from speculator_arena.warehouse import arena_home

BUSY_TIMEOUT_S = 30.0


def sql(name: str) -> str:
    return sqlfiles.read("speculator_arena.frontdoor", f"{name}.sql")


def frontdoor_dir(home=None) -> Path:
    d = arena_home(home) / "frontdoor"
    d.mkdir(parents=True, exist_ok=True)
    return d


def connect(home=None) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit: see `transaction`)."""
    con = sqlite3.connect(frontdoor_dir(home) / "state.db", timeout=BUSY_TIMEOUT_S, isolation_level=None)
    con.row_factory = sqlite3.Row
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=FULL")
    con.execute("PRAGMA foreign_keys=ON")
    con.executescript(sql("schema"))
    return con


@contextmanager
def transaction(con: sqlite3.Connection):
    """`BEGIN IMMEDIATE` ... COMMIT (ROLLBACK on any exception)."""
    con.execute("BEGIN IMMEDIATE")
    try:
        yield con
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def get_setting(con: sqlite3.Connection, key: str, default: str | None = None) -> str | None:
    row = con.execute("SELECT value FROM settings WHERE key = ?", (key,)).fetchone()
    return row["value"] if row else default


def set_setting(con: sqlite3.Connection, key: str, value: str) -> None:
    con.execute(
        "INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (key, value),
    )
