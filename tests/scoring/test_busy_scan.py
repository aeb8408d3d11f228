"""The scorer's Parquet scan of the busy windows (scoring/busy_scan.py) against the SQL view."""

import numpy as np
import pyarrow as pa
import pytest
from scoring_hand import write_hand_pass
from synthetic import write_synthetic_evaluation
from test_sql_speeds import LANES

from speculator_arena.scoring.busy import busy_windows
from speculator_arena.scoring.busy_scan import busy_windows_from_parquet
from speculator_arena.scoring.connection import open_connection, sql_text
from speculator_arena.scoring.rows import busy_windows_on

KEY = ["evaluation_id", "pass_id", "engine"]


def _partitions(wh):
    """{evaluation_id: its request parts} of every evaluation."""
    root = wh.raw / "requests"
    return {d.name.split("=", 1)[1]: sorted(str(f) for f in d.glob("*.parquet")) for d in root.iterdir()}


def _edge_cases(wh):
    """Rows the counted rule and the join decide: late, past grace, no [DONE], over budget,
    warm-up, no pass row, no last token, and rows written out of pass order."""
    reqs = [
        (0, 0.0, 10.0, 20, True, [(1, 5), (3, 5), (9, 5), (10, 5)]),
        (1, 2.0, 5.0, 5, None, [(4, 2), (5, 3)]),  # done unknown: not counted
        (1, 6.0, 120.0, 8, True, [(7, 4), (120, 4)]),  # ends after the grace end
        (2, 101.0, 110.0, 8, True, [(102, 4), (110, 4)]),  # sent after the pass ended
        (2, 1.0, 9.0, 2000, True, [(3, 1000), (9, 1000)]),
    ]  # over max_tokens
    write_hand_pass(wh, "e", "team-0", "stock", 2, reqs, ends_at=100.0, grace_ends_at=115.0)
    write_hand_pass(wh, "e", "team-0", "candidate", 3, LANES)
    # a warm-up pass and a request whose pass row does not exist: neither joins
    wh.write_rows(
        "passes",
        "e",
        [
            dict(
                pass_id="warmup-0",
                engine="stock",
                workload="team",
                lanes=1,
                ends_at=50.0,
                grace_ends_at=60.0,
                status="complete",
            )
        ],
        part="warm",
    )
    base = dict(
        workload="team", lane=0, session_id="x", turn=0, first_token_at=1.0, output_tokens=4, max_tokens=10, done=True
    )
    wh.write_rows(
        "requests",
        "e",
        [
            dict(
                base,
                pass_id="warmup-0",
                engine="stock",
                request_id="w",
                sent_at=0.0,
                last_token_at=2.0,
                ended_at=2.0,
                chunk_times=[1.0, 2.0],
                chunk_tokens=[2, 2],
            ),
            dict(
                base,
                pass_id="team-9",
                engine="stock",
                request_id="orphan",
                sent_at=0.0,
                last_token_at=2.0,
                ended_at=2.0,
                chunk_times=[1.0],
                chunk_tokens=[4],
            ),
            dict(
                base,
                pass_id="team-0",
                engine="stock",
                request_id="nolast",
                sent_at=3.0,
                last_token_at=None,
                ended_at=8.0,
                chunk_times=[],
                chunk_tokens=[],
            ),
            dict(
                base,
                pass_id="team-0",
                engine="candidate",
                request_id="late-part",
                sent_at=2.5,
                last_token_at=7.5,
                ended_at=7.5,
                chunk_times=[3.0, 7.5],
                chunk_tokens=[2, 2],
            ),
        ],
        part="mixed",
    )


def _view_and_scan(wh, ids=None):
    con = open_connection(wh)
    try:
        scan = busy_windows_on(con, wh, ids)
        view = con.execute(
            "SELECT * FROM pass_busy WHERE $ids IS NULL OR list_contains($ids, evaluation_id)", {"ids": ids}
        ).df()
        table = con.sql(sql_text("busy_inputs.sql"), params={"ids": ids}).to_arrow_table()
    finally:
        con.close()
    return scan, view, busy_windows(table)


def test_parquet_scan_equals_the_sql_view_and_the_numpy_path(wh):
    write_hand_pass(wh, "h", "team-0", "stock", 2, LANES)
    _edge_cases(wh)
    write_synthetic_evaluation(wh, "s1", seed=5)
    write_synthetic_evaluation(wh, "s2", seed=6, attack="failures")
    scan, view, numpy_path = _view_and_scan(wh)
    m = scan.merge(view, on=KEY, suffixes=("_scan", "_sql")).merge(numpy_path, on=KEY)
    from speculator_arena.protocol import load_protocol

    # s1 and s2, both engines, team and busy, every pass of the task's version (and the hand rows)
    synthetic = 2 * 2 * 2 * load_protocol().task("local-smollm2").passes_per_workload
    assert len(m) == len(view) == len(scan) == len(numpy_path) > synthetic
    assert (m.busy_tokens_scan == m.busy_tokens_sql).all()
    assert (m.busy_tokens_scan == m.busy_tokens).all()
    assert (m.busy_seconds_scan - m.busy_seconds_sql).abs().max() < 1e-9
    assert (m.busy_seconds_scan == m.busy_seconds).all()  # same kernel, same bits
    h = m[m.evaluation_id == "h"].iloc[0]
    assert h.busy_seconds_scan == 7 and h.busy_tokens_scan == 24
    e = m[m.evaluation_id == "e"].set_index("engine")
    # stock: only the first request counts; the orphan and warm-up rows are not in the pass
    assert e.at["stock", "busy_tokens_scan"] == e.at["stock", "busy_tokens_sql"]
    assert set(m.pass_id) >= {"team-0"} and "warmup-0" not in set(m.pass_id) and "team-9" not in set(m.pass_id)


def test_parquet_scan_honours_the_evaluation_filter(wh):
    write_synthetic_evaluation(wh, "s1", seed=5)
    write_synthetic_evaluation(wh, "s2", seed=6)
    scan, view, _ = _view_and_scan(wh, ["s2"])
    assert set(scan.evaluation_id) == {"s2"} and len(scan) == len(view)
    m = scan.merge(view, on=KEY)
    assert (m.busy_tokens_x == m.busy_tokens_y).all()


def test_duplicate_pass_rows_are_left_to_the_sql_path(wh):
    write_hand_pass(wh, "d", "team-0", "stock", 2, LANES)
    # a second row for the same pass (other part): the SQL join repeats every request
    wh.write_rows(
        "passes",
        "d",
        [
            dict(
                pass_id="team-0",
                engine="stock",
                workload="team",
                pass_index=0,
                lanes=1,
                started_at=0.0,
                ends_at=100.0,
                grace_ends_at=160.0,
                status="complete",
            )
        ],
        part="again",
    )
    write_hand_pass(wh, "h", "team-0", "stock", 2, LANES)
    parts = {e: sorted(str(p) for p in wh.partition_dir("requests", e).glob("*.parquet")) for e in ("d", "h")}
    passes = pa.concat_tables([wh.read_table("passes", e) for e in ("d", "h")]).select(
        ["evaluation_id", "pass_id", "engine", "lanes", "ends_at", "grace_ends_at"]
    )
    passes = passes.append_column("count_slack_tokens", pa.array([0] * passes.num_rows, pa.int64()))
    fast, to_sql = busy_windows_from_parquet(parts, passes, threads=2)
    assert to_sql == ["d"] and set(fast.evaluation_id) == {"h"}
    scan, view, _ = _view_and_scan(wh)
    m = scan.merge(view, on=KEY, suffixes=("_scan", "_sql"))
    assert len(m) == len(view) == 2
    assert (m.busy_tokens_scan == m.busy_tokens_sql).all()
    assert np.allclose(m.busy_seconds_scan, m.busy_seconds_sql, rtol=0, atol=1e-9)


def test_staged_rows_of_the_scan_equal_the_sql_view(wh):
    """The scan also builds the scalar staged requests every other query reads (same read)."""
    import pandas as pd

    from speculator_arena.scoring.busy_scan import STAGED

    _edge_cases(wh)
    write_synthetic_evaluation(wh, "s2", seed=6, attack="failures")
    con = open_connection(wh)
    try:
        cols = ", ".join(STAGED.names)
        view = con.execute(f"SELECT {cols} FROM staged_requests").df()
        passes = con.sql(sql_text("busy_pass_rows.sql")).to_arrow_table()
    finally:
        con.close()
    _, to_sql, staged = busy_windows_from_parquet(_partitions(wh), passes, staged=True)
    assert to_sql == [] and staged.schema == STAGED
    scan = staged.to_pandas()
    key = ["evaluation_id", "pass_id", "engine", "session_id", "turn", "sent_at", "ended_at"]
    a = view.sort_values(key).reset_index(drop=True)
    b = scan.sort_values(key).reset_index(drop=True)
    assert len(a) == len(b) > 100
    assert not b.counted.all() and b.counted.any()
    e = b[b.evaluation_id == "e"]
    assert len(e) == len(a[a.evaluation_id == "e"]) == 10  # of 12 rows: the warm-up and orphan rows left out
    for c in STAGED.names:
        assert (
            pd.Series(a[c]).equals(pd.Series(b[c]).astype(a[c].dtype))
            or ((a[c] == b[c]) | (a[c].isna() & b[c].isna())).all()
        ), c


def _reference_window(sent, end, lanes, times, toks):
    """The busy window of one pass by its definition (SCORING.md), one pass at a time: the
    per-pass computation the vectorized kernel replaced, kept here as its reference."""
    S, E = np.sort(sent), np.sort(end)
    pts = np.sort(np.concatenate([S, E]))
    inflight = np.searchsorted(S, pts[:-1], "right") - np.searchsorted(E, pts[:-1], "right")
    with np.errstate(invalid="ignore"):
        seg = np.diff(pts)
    secs = float(seg[(inflight >= lanes) & np.isfinite(seg)].sum())
    count = np.searchsorted(S, times, "right") - np.searchsorted(E, times, "left")  # starts <= t - ends < t
    count[np.isnan(times)] = 0
    return secs, int(toks[count >= lanes].sum())


@pytest.mark.parametrize("offset", [0.0, 1.7e9])
def test_vectorized_kernel_equals_the_per_pass_definition_to_the_bit(offset):
    """Ties between starts, ends and chunks, missing requests (+inf), NaN and infinite chunk times, lanes 0;
    times near zero and at the epoch's magnitude (where the runner's clock puts them), through
    both kernels: the int64 keys (at the epoch) and the sort (any times)."""
    from speculator_arena.scoring.busy import _keyed_windows, _sorted_windows, pass_windows

    rng = np.random.default_rng(7)
    groups, sent, end, c_group, times, toks = [], [], [], [], [], []
    lanes = rng.integers(0, 5, 300)
    for g in range(300):
        n = int(rng.integers(1, 30))
        s = np.round(rng.uniform(0, 50, n), 1) + offset
        e = s + np.round(rng.uniform(0, 20, n), 1)
        gone = rng.random(n) < 0.05
        s[gone] = e[gone] = np.inf
        groups += [g] * n
        sent.append(s)
        end.append(e)
        for i in range(n):
            k = int(rng.integers(0, 6))
            hi = e[i] if np.isfinite(e[i]) else 70.0 + offset
            t = np.round(rng.uniform(s[i] if np.isfinite(s[i]) else offset, hi, k) - offset, 1) + offset
            if k and rng.random() < 0.1:
                t[0] = s[i] if rng.random() < 0.5 else e[i]  # exactly on an event
            if k and rng.random() < 0.05:
                t[-1] = rng.choice([np.nan, np.inf, -np.inf])
            times.append(t)
            toks.append(rng.integers(0, 5, k))
            c_group += [g] * k
    groups, c_group = np.array(groups), np.array(c_group)
    sent, end, times, toks = (np.concatenate(x) for x in (sent, end, times, toks))
    args = (groups, sent, end, lanes, c_group, times, toks)
    keyed = _keyed_windows(*args)
    # the int64 keys hold the epoch's times, not times from zero (whose bits span too much)
    assert (keyed is not None) == (offset > 0)
    for secs, tokens in [pass_windows(*args), _sorted_windows(*args)] + ([keyed] if keyed else []):
        for g in range(300):
            r, c = groups == g, c_group == g
            assert (secs[g], tokens[g]) == _reference_window(sent[r], end[r], lanes[g], times[c], toks[c]), g
        assert secs.sum() > 0 and tokens.sum() > 0


def test_requests_without_any_pass_row_are_scored_not_a_crash(tmp_path):
    """An evaluation that stopped in its warm-ups has request rows and no pass row at all (the
    session's real evaluation when its engine died in warmup-solo): the scan drops its requests
    instead of indexing an empty pass table, and the scorer gives it an outcome with a reason."""
    import shutil

    from speculator_arena.scoring import score_warehouse
    from speculator_arena.warehouse import Warehouse

    wh = Warehouse(tmp_path)
    write_synthetic_evaluation(wh, "stopped")
    write_synthetic_evaluation(wh, "whole")
    shutil.rmtree(wh.raw / "passes" / "evaluation_id=stopped")
    ev = score_warehouse(wh, evaluation_ids=["stopped"]).evaluations.set_index("evaluation_id")
    assert score_warehouse(wh, evaluation_ids=["whole"]).evaluations.specscore.iloc[0] > 0
    assert ev.loc["stopped", "specscore"] != ev.loc["stopped", "specscore"] or ev.loc["stopped", "specscore"] == 0
    assert ev.loc["stopped", "specscore_reason"]
