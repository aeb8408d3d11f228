"""Per-pass speeds and the failure rule in SQL, on hand-made rows."""

import pytest
from scoring_hand import write_hand_pass

from speculator_arena.protocol import load_protocol
from speculator_arena.scoring import score_warehouse

LANES = [
    (0, 0.0, 10.0, 20, True, [(1, 5), (3, 5), (9, 5), (10, 5)]),
    (1, 2.0, 5.0, 5, True, [(4, 2), (5, 3)]),
    (1, 6.0, 12.0, 108, True, [(7, 4), (12, 4), (5.5, 100)]),
]


def speeds(wh):
    con = wh.connect(read_only=True)
    try:
        return con.execute("SELECT * FROM pass_speeds ORDER BY pass_id, engine").df()
    finally:
        con.close()


def test_busy_window_speed_in_sql(wh):
    write_hand_pass(wh, "h", "team-0", "stock", 2, LANES)
    row = speeds(wh).iloc[0]
    assert row.busy_seconds == 7
    assert row.busy_tokens == 24
    assert row.busy_window_speed == pytest.approx(24 / 7)


def test_failed_request_occupies_lane_but_its_tokens_do_not_count(wh):
    lanes = [LANES[0], LANES[1], (1, 6.0, 12.0, 8, False, [(7, 4), (12, 4)])]
    write_hand_pass(wh, "h", "team-0", "stock", 2, lanes)
    row = speeds(wh).iloc[0]
    assert row.busy_seconds == 7
    assert row.busy_tokens == 24 - 4  # the failed request's chunk at 7 no longer counts
    assert row.failures == 1 and row.counted == 2


def test_solo_speed_is_tokens_over_request_time(wh):
    write_hand_pass(
        wh,
        "h",
        "solo-0",
        "stock",
        1,
        [(0, 0.0, 4.0, 40, True, None), (0, 5.0, 6.0, 20, True, None), (0, 7.0, 8.0, 999, False, None)],
    )
    row = speeds(wh).iloc[0]
    assert row.request_time_speed == pytest.approx(60 / 5)


def test_request_sent_after_pass_end_or_ended_after_grace_is_not_counted(wh):
    write_hand_pass(
        wh,
        "h",
        "solo-0",
        "stock",
        1,
        [
            (0, 0.0, 4.0, 40, True, None),
            (0, 100.0, 101.0, 20, True, None),
            (0, 99.0, 160.5, 20, True, None),
            (0, 99.5, 160.0, 30, True, None),
        ],
        ends_at=100.0,
        grace_ends_at=160.0,
    )
    row = speeds(wh).iloc[0]
    assert row.counted == 2 and row.failures == 2
    assert row.request_time_speed == pytest.approx(70 / (4 + 60.5))


@pytest.mark.parametrize("n,cand_fail,zeroed", [(100, 2, False), (100, 3, True), (300, 3, False), (300, 4, True)])
def test_failure_rule_both_sides(wh, n, cand_fail, zeroed):
    # limit = max(2, 0.01 * requests): 2 for 100 requests, 3 for 300
    for engine, fails in (("candidate", cand_fail), ("stock", 0)):
        reqs = [(0, float(i), i + 0.5, 10, i >= fails, None) for i in range(n)]
        write_hand_pass(wh, "h", "solo-0", engine, 1, reqs, ends_at=1000.0, grace_ends_at=1100.0)
    p = score_warehouse(wh).passes.set_index("pass_id").loc["solo-0"]
    assert bool(p.zeroed_by_failure_rule) is zeroed
    if zeroed:
        assert p.ratio == 0
    else:
        assert p.ratio == pytest.approx(1.0)


def test_numpy_busy_window_equals_the_sql_view(wh):
    from synthetic import write_synthetic_evaluation

    from speculator_arena.scoring.busy import busy_windows
    from speculator_arena.scoring.connection import sql_text

    write_hand_pass(wh, "h", "team-0", "stock", 2, LANES)
    write_synthetic_evaluation(wh, "s1", seed=5)
    write_synthetic_evaluation(wh, "s2", seed=6, attack="failures")
    con = wh.connect(read_only=True)
    try:
        fast = busy_windows(con.sql(sql_text("busy_inputs.sql"), params={"ids": None}).to_arrow_table())
        view = con.execute("SELECT * FROM pass_busy").df()
    finally:
        con.close()
    m = fast.merge(view, on=["evaluation_id", "pass_id", "engine"], suffixes=("_np", "_sql"))
    timed = 2 * 2 * 3 * load_protocol().task("local-smollm2").passes_per_workload  # s1, s2 x engines x passes
    assert len(m) == len(view) == len(fast) == 1 + timed
    assert (m.busy_tokens_np == m.busy_tokens_sql).all()
    assert (m.busy_seconds_np - m.busy_seconds_sql).abs().max() < 1e-9
    h = m[m.evaluation_id == "h"].iloc[0]
    assert h.busy_seconds_np == 7 and h.busy_tokens_np == 24


def test_numpy_busy_window_does_not_depend_on_row_order(wh):
    import numpy as np
    from synthetic import write_synthetic_evaluation

    from speculator_arena.scoring.busy import busy_windows
    from speculator_arena.scoring.connection import sql_text

    write_synthetic_evaluation(wh, "s1", seed=7)
    con = wh.connect(read_only=True)
    try:
        table = con.sql(sql_text("busy_inputs.sql"), params={"ids": None}).to_arrow_table()
    finally:
        con.close()
    shuffled = table.take(np.random.default_rng(0).permutation(table.num_rows))
    a = busy_windows(table).sort_values(["pass_id", "engine"]).reset_index(drop=True)
    b = busy_windows(shuffled).sort_values(["pass_id", "engine"]).reset_index(drop=True)
    assert (a.busy_tokens == b.busy_tokens).all()
    assert np.allclose(a.busy_seconds, b.busy_seconds, rtol=0, atol=1e-9)
