"""The warehouse's change marker (warehouse/generation.py) and the scorer filling the board's
score store (board/fill.py): a board re-read with nothing landed stats no partition directory,
a landing is seen at the next re-read, and what the scorer scored as it landed is not scored
again by the board.

Real parts throughout: the Kubernetes landing, the warehouse's writers, the packer, the scorer
and Dagster's `scores` asset. The wrappers only count calls and call through.
"""

from __future__ import annotations

import json
import shutil
import time

import pytest
from synthetic import write_synthetic_evaluation

from speculator_arena.board import data
from speculator_arena.board import memo as memo_module
from speculator_arena.board.memo import BoardMemo
from speculator_arena.warehouse import catalog, generation
from speculator_arena.warehouse.schema import TABLES
from speculator_arena.warehouse.store import Warehouse

from .conftest import SYNTHETIC, TASK, write_synthetic
from .test_score_store import _same_board

LANDED = "ev-landed"


def _settle():
    time.sleep(3 * catalog.RACY_FINE_NS / 1e9)  # mtimes older than the racy window: trusted


@pytest.fixture
def walks(monkeypatch):
    """How often the board statted the warehouse: the catalog's listing of every partition
    directory, and the scores' fingerprints (both call through to the real functions)."""
    n = {"listing": 0, "fingerprints": 0, "scored": []}
    listing, prints, score = catalog.partition_mtimes, memo_module._fingerprints, data.score_frames

    def counting_listing(raw_table_dir):
        n["listing"] += 1
        return listing(raw_table_dir)

    def counting_prints(home, ids, now_ns):
        n["fingerprints"] += 1
        return prints(home, ids, now_ns)

    def counting_score(home, ids, protocol_version):
        n["scored"].append(sorted(ids))
        return score(home, ids, protocol_version)

    monkeypatch.setattr(catalog, "partition_mtimes", counting_listing)
    monkeypatch.setattr(memo_module, "_fingerprints", counting_prints)
    monkeypatch.setattr(data, "score_frames", counting_score)
    return n


def _pod_results(tmp_path, wh: Warehouse):
    """A finished pod's results for LANDED, and the launcher's row of it (running) in `wh`."""
    from speculator_arena.backends.kubernetes.results import write_results_manifest
    from speculator_arena.runners.status import write_status

    results = tmp_path / "results" / LANDED
    write_synthetic_evaluation(
        Warehouse(results),
        LANDED,
        account_id="acct-landed",
        label="landed",
        split="dev",
        seed=41,
        created_at=1.8e9 + 200,
        speedups={"solo": 1.6, "team": 1.5, "busy": 1.4},
    )
    write_results_manifest(results, LANDED)
    queued = dict(Warehouse(results).read_table("evaluations", LANDED).to_pylist()[0], status="queued")
    queued["provenance"] = json.dumps({"launcher": True})
    return results, write_status(wh, queued, "running", provenance={"backend": "kubernetes"})


def test_a_reread_with_nothing_landed_stats_nothing_and_a_landing_is_seen(tmp_path, walks, monkeypatch):
    from speculator_arena.backends.kubernetes.results import land

    monkeypatch.setenv("ARENA_DUCKDB_THREADS", "1")  # exact comparisons below (test_score_store.py)
    home = tmp_path / "home"
    wh = write_synthetic(home, [e for e in SYNTHETIC if e[0] in ("ev-alpha", "ev-alpha-test", "ev-beta")])
    results, launcher_row = _pod_results(tmp_path, wh)
    _settle()
    memo = BoardMemo(home)
    first = memo.board(TASK, None)
    assert walks["listing"] >= 1 and walks["fingerprints"] >= 1
    assert LANDED not in set(first.boards["dev"]["evaluation_id"])  # running: not ranked yet

    # the TTL expired, nothing landed: not one directory statted, nothing scored, the same board
    before = dict(walks, scored=list(walks["scored"]))
    again = memo.board(TASK, None)
    assert (walks["listing"], walks["fingerprints"]) == (before["listing"], before["fingerprints"])
    assert walks["scored"] == before["scored"] and again is first
    assert memo.last_refresh == {"index_parts_read": 0, "evaluations_scored": 0}

    # the pod's results land: the marker moves, and the next re-read walks and sees them
    marker = generation.read(home)
    land(wh, results, LANDED, launcher_row=launcher_row, provenance={"pod": "p-1"})
    assert generation.read(home) != marker
    _settle()
    landed = memo.board(TASK, None)
    assert walks["listing"] == before["listing"] + 1 and walks["fingerprints"] > before["fingerprints"]
    assert walks["scored"][len(before["scored"]) :] == [[LANDED]]
    assert LANDED in set(landed.boards["dev"]["evaluation_id"])
    monkeypatch.setenv("ARENA_SCORE_STORE", "0")  # ... equal to scoring every candidate afresh
    _same_board(BoardMemo(home).board(TASK, None), landed)
    monkeypatch.delenv("ARENA_SCORE_STORE")

    # a partition removed by hand bumps nothing: unseen until the full check, which
    # ARENA_BOARD_FULL_CHECK=0 makes every read do (and the dashboard's Refresh makes the next)
    for table in TABLES:
        shutil.rmtree(wh.partition_dir(table, LANDED), ignore_errors=True)
    assert LANDED in set(memo.board(TASK, None).boards["dev"]["evaluation_id"])  # the documented limit
    BoardMemo.recheck_all()
    assert LANDED not in set(memo.board(TASK, None).boards["dev"]["evaluation_id"])
    monkeypatch.setenv("ARENA_BOARD_FULL_CHECK", "0")
    n = walks["listing"]
    memo.board(TASK, None)
    assert walks["listing"] == n + 1


def test_every_writer_of_raw_rows_moves_the_marker(tmp_path):
    from speculator_arena.warehouse import packs

    home = tmp_path / "home"
    assert generation.read(home) is None  # no marker yet: a value too (module docstring)
    wh = write_synthetic(home, [e for e in SYNTHETIC if e[0] in ("ev-alpha", "ev-beta")])
    seen = {generation.read(home)}
    assert None not in seen
    row = wh.read_table("evaluations", "ev-beta").to_pylist()[0]
    wh.write_rows("evaluations", "ev-beta", [dict(row, label="relabelled")], part="evaluation", replace=True)
    seen.add(generation.read(home))
    _settle()
    report = packs.pack(home)
    assert report.packed >= 1
    seen.add(generation.read(home))
    wh.drop_evaluation("ev-alpha")
    seen.add(generation.read(home))
    assert len(seen) == 4  # each one a value never written before


def test_the_scorer_fills_the_store_so_the_board_scores_nothing_after_a_landing(tmp_path, walks, monkeypatch):
    from speculator_arena.board import fill
    from speculator_arena.scoring.registry import score_and_record

    monkeypatch.setenv("ARENA_DUCKDB_THREADS", "1")
    home = tmp_path / "home"
    wh = write_synthetic(home, [e for e in SYNTHETIC if e[0] in ("ev-alpha", "ev-alpha-test", "ev-beta")])
    _settle()
    BoardMemo(home).board(TASK, None)  # a board read before: the store holds the three
    assert walks["scored"] == [["ev-alpha", "ev-alpha-test", "ev-beta"]]

    # an evaluation lands and the `evaluation` asset scores it (score_and_record, its one id),
    # right away: the fill waits out the racy window rather than store nothing
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
    score_and_record(wh, None, ["ev-beta-test"], keep=fill)
    fresh = BoardMemo(home)
    landed = fresh.board(TASK, None)
    assert walks["scored"][1:] == [] and fresh.last_refresh["evaluations_scored"] == 0
    assert "ev-beta-test" in set(landed.boards["test"]["evaluation_id"])
    monkeypatch.setenv("ARENA_SCORE_STORE", "0")
    _same_board(BoardMemo(home).board(TASK, None), landed)
    monkeypatch.delenv("ARENA_SCORE_STORE")


def test_the_scores_asset_fills_the_store_for_the_boards_candidates(tmp_path, walks, monkeypatch):
    import dagster as dg

    from speculator_arena.assets.resources import default_resources
    from speculator_arena.assets.scores import scores
    from speculator_arena.protocol import load_protocol

    monkeypatch.setenv("ARENA_DUCKDB_THREADS", "1")
    home = tmp_path / "home"
    write_synthetic(home, [e for e in SYNTHETIC if e[0] in ("ev-alpha", "ev-alpha-test", "ev-beta")])
    version = load_protocol().version
    result = dg.materialize([scores], partition_key=str(version), resources=default_resources(home))
    assert result.success
    memo = BoardMemo(home)
    filled = memo.board(TASK, None)
    assert walks["scored"] == [] and memo.last_refresh["evaluations_scored"] == 0
    monkeypatch.setenv("ARENA_SCORE_STORE", "0")
    _same_board(BoardMemo(home).board(TASK, None), filled)
