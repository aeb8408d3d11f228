"""docs/scoring.md "Steal correction" (v11 on, the embedded CPU task): each engine's speed on a
pass is its speed / (1 - f), f the pass's steal CPU-seconds per second of its contention intervals,
with the steal share counted at most up to the contention limit. Checked on a synthetic evaluation
whose contention rows are edited by hand, scored under v10 (no correction) and v11, and against
the ratio computed here from the edited rows, not by the scorer's SQL.

What a candidate gains by lying or provoking: it cannot write the steal (the runner reads the
kernel's counters); a turn it made the host steal from is corrected at most up to the limit.
"""

import pyarrow as pa
import pytest
from synthetic import write_synthetic_evaluation

from speculator_arena.protocol import load_protocol
from speculator_arena.scoring import score_warehouse


def _set_steal(wh, eid, shares: dict) -> dict:
    """Set the steal share (of all CPU time) of (pass, engine)'s intervals; return each edited
    (pass, engine)'s f as docs/scoring.md defines it, computed here from the edited rows."""
    t = wh.read_table("contention", eid).to_pandas()
    expected = {}
    cap = load_protocol(11).contention.max_steal_share
    for (pid, engine), share in shares.items():
        hit = (t.pass_id == pid) & (t.engine == engine)
        assert hit.any(), (pid, engine)
        t.loc[hit, "steal_seconds"] = share * t.loc[hit, "total_cpu_seconds"]
        rows = t[hit & t.error.isna()]
        seconds = float((rows.ended_at - rows.started_at).sum())
        expected[(pid, engine)] = min(share, cap) * float(rows.total_cpu_seconds.sum()) / seconds
    for f in wh.partition_dir("contention", eid).glob("*.parquet"):
        f.unlink()
    wh.write_rows("contention", eid, pa.Table.from_pandas(t, preserve_index=False))
    return expected


def test_the_correction_takes_the_stolen_time_off_each_engines_pass_up_to_the_limit(wh):
    assert load_protocol(11).task("local-smollm2").steal_correction
    assert not load_protocol(10).task("local-smollm2").steal_correction
    write_synthetic_evaluation(wh, "st", protocol_version=10)
    f = _set_steal(
        wh,
        "st",
        {
            ("solo-0", "candidate"): 0.03,  # within the limit: all of it
            ("team-1", "candidate"): 0.30,  # far over (one pass: the pooled workload stays under it)
            ("busy-2", "stock"): 0.02,  # the stock engine's turn: its speed rises, the ratio falls
        },
    )
    before = score_warehouse(wh, 10).passes.set_index("pass_id")
    s = score_warehouse(wh, 11)
    after = s.passes.set_index("pass_id")
    assert not s.evaluations.set_index("evaluation_id").loc["st"].void
    assert (before.candidate_steal_fraction == 0).all() and (before.stock_steal_fraction == 0).all()
    # the capped pass: f is the limit's share times the CPUs, not the 30% stolen
    assert f[("team-1", "candidate")] == pytest.approx(0.05 * 2, rel=0.05)
    for pid in before.index:
        fc, fs = f.get((pid, "candidate"), 0.0), f.get((pid, "stock"), 0.0)
        assert after.loc[pid, "candidate_steal_fraction"] == pytest.approx(fc, abs=1e-12), pid
        assert after.loc[pid, "stock_steal_fraction"] == pytest.approx(fs, abs=1e-12), pid
        assert after.loc[pid, "candidate_speed"] == pytest.approx(before.loc[pid, "candidate_speed"] / (1 - fc)), pid
        assert after.loc[pid, "ratio"] == pytest.approx(before.loc[pid, "ratio"] * (1 - fs) / (1 - fc)), pid
    moved = after.ratio / before.ratio
    assert moved.loc["solo-0"] > 1.05 and moved.loc["team-1"] == pytest.approx(1 / 0.9, rel=0.02)
    assert moved.loc["busy-2"] < 0.97
    assert sum(abs(m - 1) > 1e-12 for m in moved) == 3  # no other pass moved
