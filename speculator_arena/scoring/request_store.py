"""The request store: the scorer's per-request work, kept so that a rescore does not redo it.

Why: nearly all of a scoring's cost is per request (reading 6.7 million timed requests and
their chunk lists at 1,000 evaluations, the busy-window sweep, the counted rule, the length
pairs, the figures' percentiles), and none of it depends on the protocol version being scored
except through one number, `count_slack_tokens` (the counted rule, rules/counted.py). A
rescore under a new version (an operator's `arena score`, the board's store for a version it
has not seen, a calibration scoring its candidate document) would otherwise read and sweep
every request again to reach the same per-request results. docs/benchmarks/scoring.md has the
figures: a rescore through the store costs about twice the bare scan of the requests, the
first scoring about six times.

What: `$ARENA_HOME/scores/request-store/<key>/s<NN>/`, 16 shards (an evaluation's is
crc32(id) mod 16, so scoring one evaluation as it lands reads and rewrites one shard, not the
store of 100,000), each a series of generations (warehouse/frame_files.py) of four frames, the
results the scorer's queries would otherwise derive from the requests, per evaluation:
- `busy`: the busy windows of each timed pass and engine (scoring/busy.py COLUMNS);
- `sums`: per pass and engine, the requests, counted, failures, counted tokens and request
  seconds (sql/pass_request_sums.sql; the view `pass_requests` reads them);
- `length`: the paired length sums (sql/gate_length.sql);
- `figures`: the request figures per engine and workload (sql/figures_requests.sql);
and, per evaluation, the fingerprint its rows were read at (the mtime of each raw partition
directory, warehouse/catalog.py `fingerprints`) and the count slack they were counted with.
`<key>` digests the source of scoring/, rules/ and warehouse/, so other code never reads them.

Used only where both hold: the evaluation's fingerprint equals the one taken before this
scoring read anything, and its task's count slack under the version being scored is the one
stored; everything else is read and computed from the raw rows as before, and written back.
Never authoritative: deleting it is always safe, an unreadable or racy entry is absent, a
store no current key names is removed an hour after its last write, and a home that cannot be
written scores as before. `ARENA_REQUEST_STORE=0` turns it off.
tests/scoring/test_request_store.py checks a rescore through it against one without it.
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from speculator_arena import settings
from speculator_arena.warehouse.frame_files import (
    exact_tables,
    generations,
    prints_table,
    prune_stores,
    read_prints,
    source_digest,
    to_frame,
    write_generation,
)
from speculator_arena.warehouse.schema import TABLES

FRAMES = ("busy", "sums", "length", "figures")
PRINTS = "prints"
SLACK = "count_slack_tokens"  # the fingerprint table's extra column
KEEP_GENERATIONS = 2  # the newest, and the one a reader may still be reading
CODE_DIRS = ("scoring", "rules", "warehouse")  # not protocol/: the slack is keyed per evaluation
STALE_AFTER_SECONDS = 3600.0
SHARDS = 16  # an evaluation's rows live in shard crc32(id) % SHARDS


def enabled() -> bool:
    return settings.flag("ARENA_REQUEST_STORE")


def root(home: str | os.PathLike) -> Path:
    return Path(home) / "scores" / "request-store"


def store_dir(home: str | os.PathLike) -> Path:
    return root(home) / source_digest(CODE_DIRS)[:16]


def shard_of(evaluation_id: str) -> int:
    return zlib.crc32(evaluation_id.encode()) % SHARDS


def _shard_dir(home: str | os.PathLike, shard: int) -> Path:
    return store_dir(home) / f"s{shard:02d}"


@dataclass
class Shard:
    """One shard's newest readable generation: Arrow tables as Parquet holds them, and per
    evaluation its key (mtime per raw table..., count slack)."""

    tables: dict[str, pa.Table]
    keys: dict[str, tuple]


@dataclass
class Held:
    """What the store holds for the shards of the evaluations asked about (none when it is off)."""

    shards: dict[int, Shard] = field(default_factory=dict)

    @property
    def keys(self) -> dict[str, tuple]:
        return {e: k for s in self.shards.values() for e, k in s.keys.items()}

    def hits(self, prints: dict[str, tuple], slack: dict[str, int]) -> list[str]:
        """The evaluations whose stored rows hold: same fingerprint (a racy one never matches),
        same count slack."""
        keys = self.keys
        return sorted(e for e, p in prints.items() if keys.get(e) == (*p, slack.get(e, 0)))

    def rows(self, name: str, ids) -> pa.Table:
        """The stored rows of `name` of the evaluations `ids` (all in held shards)."""
        by = _by_shard(ids)
        parts = [_rows(self.shards[s].tables[name], mine) for s, mine in sorted(by.items()) if s in self.shards]
        return pa.concat_tables(parts) if len(parts) > 1 else parts[0]


def _by_shard(ids) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for e in ids:
        out.setdefault(shard_of(e), []).append(e)
    return out


def _rows(t: pa.Table, ids) -> pa.Table:
    return t.filter(pc.is_in(t["evaluation_id"], pa.array(sorted(ids), pa.string())))


def load(home: str | os.PathLike, ids) -> Held:
    """The shards holding the evaluations `ids`, each its newest readable generation."""
    held = Held()
    if not enabled():
        return held
    for shard in sorted(_by_shard(ids)):
        for gen in generations(_shard_dir(home, shard))[:KEEP_GENERATIONS]:
            try:
                keys = read_prints(pq.read_table(gen / f"{PRINTS}.parquet"), (SLACK,))
                held.shards[shard] = Shard({name: pq.read_table(gen / f"{name}.parquet") for name in FRAMES}, keys)
                break
            except (OSError, pa.ArrowException, ValueError, KeyError):
                continue  # removed under us by a writer, torn by a disk error, another layout: the previous one
    return held


def combine(held: Held, hits: list[str], fresh: dict) -> dict:
    """The scorer's rows of every evaluation scored: the stored ones of `hits`, then `fresh`
    (what this scoring computed from the raw rows for the others). Pandas frames stay pandas
    frames of the same dtypes (to_frame gives back what to_table was given), `sums` stays Arrow
    (DuckDB reads its NULLs as NULLs; a pandas NaN it would read as NaN, which compares above
    every number)."""
    if not hits:
        return dict(fresh)
    out = {}
    for name in FRAMES:
        old, new = held.rows(name, hits), fresh[name]
        if isinstance(new, pd.DataFrame):
            old = to_frame(old)
            out[name] = new if not len(old) else old if not len(new) else pd.concat([old, new], ignore_index=True)
        else:
            out[name] = (
                new if not old.num_rows else old if not new.num_rows else pa.concat_tables([old, new.cast(old.schema)])
            )
    # the scan's order: by evaluation, each evaluation's passes as they came
    out["busy"] = out["busy"].sort_values(["evaluation_id"], kind="stable").reset_index(drop=True)
    return out


def save(home: str | os.PathLike, held: Held, fresh: dict, prints: dict[str, tuple], slack: dict[str, int]) -> int:
    """Write, in each shard they fall in, the rows of `fresh` (the scorer's results of the
    evaluations it read from the raw rows) of the evaluations whose fingerprint in `prints` is
    trustworthy, with what that shard kept of others. Returns the shards written (0: off,
    nothing new, or not writable: scoring goes on)."""
    if not enabled():
        return 0
    new = {e: p for e, p in prints.items() if len(p) == len(TABLES)}  # racy ones are (object(),)
    if not new:
        return 0
    try:
        fresh_tables = {}
        for name in FRAMES:
            t = fresh[name]
            if isinstance(t, pd.DataFrame):  # written only where it reads back as it is
                t = exact_tables({name: t[t["evaluation_id"].isin(list(new))]})[name]
            fresh_tables[name] = t
    except (pa.ArrowException, ValueError, TypeError, AssertionError):
        return 0  # a frame Parquet cannot hold
    written = 0
    for shard, mine in sorted(_by_shard(new).items()):
        if _save_shard(home, shard, held.shards.get(shard), fresh_tables, {e: new[e] for e in mine}, slack):
            written += 1
    if written:
        prune(home)
    return written


def _save_shard(home, shard: int, old: Shard | None, fresh: dict[str, pa.Table], new: dict[str, tuple], slack) -> bool:
    keep = sorted(e for e in (old.keys if old else {}) if e not in new)
    try:
        mine = {name: _rows(t, new) for name, t in fresh.items()}
        try:
            tables = {name: _after(old, name, keep, mine[name]) for name in FRAMES}
        except (pa.ArrowException, ValueError):
            keep = []  # the kept rows' types differ from these (a column all NULL in one): not kept
            tables = dict(mine)
        keys = {**{e: old.keys[e][:-1] for e in keep}, **new}
        slacks = {**{e: old.keys[e][-1] for e in keep}, **{e: slack.get(e, 0) for e in new}}
        tables[PRINTS] = prints_table(keys, {SLACK: slacks})
        write_generation(_shard_dir(home, shard), tables, KEEP_GENERATIONS)
        return True
    except (OSError, pa.ArrowException, ValueError, TypeError):
        return False  # a read-only home, a full disk


def _after(old: Shard | None, name: str, keep: list[str], t: pa.Table) -> pa.Table:
    """The kept evaluations' stored rows of `name`, then `t`."""
    if not keep:
        return t
    kept = _rows(old.tables[name], keep)
    return t if not kept.num_rows else pa.concat_tables([kept, t.cast(kept.schema)])


def prune(home: str | os.PathLike, stale_after: float = STALE_AFTER_SECONDS) -> list[Path]:
    """Remove the stores of other source (another version of the scorer) once none of their
    shards was written for `stale_after` seconds: nothing can read them again."""
    return prune_stores(root(home), {store_dir(home).name}, stale_after)
