"""The board's score store (board/store.py): a fresh process scores only what landed or changed.

Each `BoardMemo(home)` below stands for a fresh process (a restarted server, an `arena board
--text`): it has nothing in memory, so whatever it does not score it read from the store. The
scorer is the real one; the wrapper only records which evaluations it was asked to score.
"""

from __future__ import annotations

import time

import pandas as pd
import pytest

from speculator_arena.board import data, store
from speculator_arena.board.memo import BoardMemo
from speculator_arena.protocol import available_versions, load_protocol
from speculator_arena.warehouse import catalog
from speculator_arena.warehouse.schema import TABLES

from .conftest import SYNTHETIC, TASK, write_synthetic


def _settle():
    time.sleep(3 * catalog.RACY_FINE_NS / 1e9)  # mtimes older than the racy window: trusted


@pytest.fixture
def asked(monkeypatch):
    """The id lists the board handed the scorer, in order (the real scorer runs)."""
    calls: list[list[str]] = []
    real = data.score_frames

    def counting(home, ids, protocol_version):
        calls.append(sorted(ids))
        return real(home, ids, protocol_version)

    monkeypatch.setattr(data, "score_frames", counting)
    return calls


def _same_board(a: data.ScoreFrames, b: data.ScoreFrames) -> None:
    """Every column of both splits' ranked rows, and every frame, value for value."""
    for split in data.SPLITS:
        pd.testing.assert_frame_equal(a.boards[split], b.boards[split], check_exact=True)
    for name in ("evaluations", "passes", "gates", "figures"):
        x, y = getattr(a, name), getattr(b, name)
        x = x.sort_values("evaluation_id", kind="stable").reset_index(drop=True)
        y = y.sort_values("evaluation_id", kind="stable").reset_index(drop=True)
        pd.testing.assert_frame_equal(x, y, check_exact=True)
    assert (a.protocol_version, a.protocol_digest) == (b.protocol_version, b.protocol_digest)


def test_a_fresh_process_scores_only_what_landed_and_a_new_version_rescores(tmp_path, asked, monkeypatch):
    from synthetic import write_synthetic_evaluation

    # one DuckDB thread: its parallel sums of doubles add in thread order, so two scorings of the
    # same rows may differ in a figure's last bit (docs/benchmarks/scoring.md); compared exactly below
    monkeypatch.setenv("ARENA_DUCKDB_THREADS", "1")
    home = tmp_path / "home"
    wh = write_synthetic(home, [e for e in SYNTHETIC if e[0] in ("ev-alpha", "ev-alpha-test", "ev-beta")])
    _settle()
    first = BoardMemo(home).board(TASK, None)
    assert asked == [["ev-alpha", "ev-alpha-test", "ev-beta"]]
    assert list((home / "scores" / "board-store").iterdir())  # the store was written

    # a fresh process: nothing scored, the same board to the last bit
    again = BoardMemo(home).board(TASK, None)
    assert len(asked) == 1
    _same_board(first, again)

    # an evaluation lands: the next fresh process scores it alone; the gap flag spans both
    write_synthetic_evaluation(
        wh,
        "ev-beta-test",
        account_id="acct-b",
        label="beta",
        split="test",
        seed=31,
        created_at=1.8e9 + 99,
        speedups={"solo": 1.3, "team": 1.2, "busy": 1.1},
    )
    _settle()
    memo = BoardMemo(home)
    landed = memo.board(TASK, None)
    assert asked[1:] == [["ev-beta-test"]]
    assert memo.last_refresh["evaluations_scored"] == 1
    test_rows = landed.boards["test"].set_index("evaluation_id")
    assert bool(test_rows.at["ev-alpha-test", "gap_flag"]) and test_rows.at["ev-beta-test", "gap_flag"] == False  # noqa: E712
    # ... and equals what scoring everything from nothing gives
    monkeypatch.setenv("ARENA_SCORE_STORE", "0")
    _same_board(BoardMemo(home).board(TASK, None), landed)
    assert asked[2] == ["ev-alpha", "ev-alpha-test", "ev-beta", "ev-beta-test"]
    monkeypatch.delenv("ARENA_SCORE_STORE")

    # a TTL expiry in the same process with nothing changed scores nothing
    memo.board(TASK, None)
    assert len(asked) == 3 and memo.last_refresh["evaluations_scored"] == 0

    # another protocol version: its own store, so every candidate is scored once under it
    other = next(v for v in sorted(available_versions(), reverse=True) if v != load_protocol().version)
    under_other = memo.board(TASK, other)
    assert asked[3] == ["ev-alpha", "ev-alpha-test", "ev-beta", "ev-beta-test"]
    assert under_other.protocol_version == other
    BoardMemo(home).board(TASK, other)
    assert len(asked) == 4


def test_a_changed_evaluation_is_scored_again(tmp_path, asked):
    home = tmp_path / "home"
    wh = write_synthetic(home, [e for e in SYNTHETIC if e[0] in ("ev-alpha", "ev-beta")])
    _settle()
    BoardMemo(home).board(TASK, None)
    assert asked == [["ev-alpha", "ev-beta"]]
    # ev-beta's evaluation row is rewritten (relabelled): a fresh process sees its partition
    # changed and scores it, and it alone, again
    row = wh.read_table("evaluations", "ev-beta").to_pylist()[0]
    row.update(label="beta-renamed")
    wh.write_rows("evaluations", "ev-beta", [row], replace=True)
    now = BoardMemo(home).board(TASK, None)
    assert asked[1] == ["ev-beta"]
    assert "beta-renamed" in set(now.boards["dev"]["label"])
    _settle()
    later = BoardMemo(home).board(TASK, None)  # stored unless its fingerprint was still racy
    assert all(ids == ["ev-beta"] for ids in asked[2:])
    _same_board(now, later)


def test_stored_frames_read_back_exactly(synthetic_home, tmp_path):
    """The scorer's four frames of every synthetic evaluation (gates failed, void, partial,
    other tasks) through a store generation and back: equal, dtypes and missing values too."""
    from speculator_arena.scoring import score_warehouse

    scores = score_warehouse(synthetic_home)
    from speculator_arena.scoring.intervals import bootstrapped_intervals

    frames = {name: getattr(scores, name) for name in ("evaluations", "passes", "gates", "figures")}
    drawn = bootstrapped_intervals(scores.evaluations, scores.passes)
    assert drawn  # some evaluation has a SpecScore from its ratios
    frames["intervals"] = pd.DataFrame(
        {
            "evaluation_id": pd.Series(sorted(drawn), dtype=object),
            "boot_low": [drawn[e][0] for e in sorted(drawn)],
            "boot_high": [drawn[e][1] for e in sorted(drawn)],
        }
    )
    ids = sorted(scores.evaluations["evaluation_id"])
    prints = {eid: tuple(range(len(TABLES))) for eid in ids}
    home = tmp_path / "h"
    assert store.save(home, scores.protocol_version, scores.protocol_digest, frames, prints) is not None
    back, back_prints = store.load(home, scores.protocol_version, scores.protocol_digest)
    assert back_prints == prints
    for name in store.FRAMES:
        pd.testing.assert_frame_equal(back[name], frames[name].reset_index(drop=True), check_exact=True)
    # another document's digest reads nothing of it
    assert store.load(home, scores.protocol_version, "0" * 64) is None


def test_a_store_no_current_key_names_is_pruned_once_an_hour_unwritten(tmp_path):
    """Each change of the scorer's source or a protocol document starts a new store and can never
    read the old one again: the next save removes it once it is an hour unwritten, and keeps the
    current stores of every version and a stale one written lately (a server still running the
    old code)."""
    import os

    from speculator_arena.protocol import protocol_digest

    v = load_protocol().version
    frames = {
        name: pd.DataFrame({"evaluation_id": pd.Series(["e"], dtype=object), "x": [1.0]}) for name in store.FRAMES
    }
    prints = {"e": tuple(range(len(TABLES)))}
    home = tmp_path / "h"
    gone = store.save(home, v, "0" * 64, frames, prints)  # a document no longer here
    lately = store.save(home, v, "1" * 64, frames, prints)
    older_version = store.save(home, v - 1, protocol_digest(v - 1), frames, prints)
    then = time.time() - store.STALE_AFTER_SECONDS - 60
    for d in (gone, gone.parent):
        os.utime(d, (then, then))
    current = store.save(home, v, protocol_digest(v), frames, prints)
    assert not gone.parent.exists()
    assert lately.exists() and older_version.exists() and current.exists()
    assert store.load(home, v, protocol_digest(v))[1] == prints
    # nothing else under the store's root is touched, and a second prune finds nothing
    (home / "scores" / "board-store" / "README").write_text("operator's note")
    assert store.prune(home) == []
    assert (home / "scores" / "board-store" / "README").exists()
