"""The shown figures of issue 20 on the session's real local evaluation (the development engine's
n-gram speculation against the stock engine, SmolLM2-135M on CPU: real per-position counters, real
chunks), against tests/board/independent_shown.py's recomputation from its raw Parquet."""

from __future__ import annotations

import io

import independent_shown as ind
import numpy as np
import pyarrow.parquet as pq
import pytest

from speculator_arena.board import acceptance, curves, goodput, goodput_objectives, shown
from speculator_arena.board.export import requests_parquet
from speculator_arena.protocol import load_protocol

pytestmark = pytest.mark.slow
SLACK = load_protocol().count_slack_tokens
WORKLOADS = ("solo", "team", "busy")


@pytest.fixture(scope="module")
def real(real_evaluation):
    home, eid = real_evaluation.home, real_evaluation.evaluation_id
    return home, eid, shown.read_shown(home, [eid])


def test_curves_acceptance_and_proxy_of_the_real_evaluation(real):
    home, eid, rows = real
    points = curves.interactivity_points(rows).set_index(["engine", "workload"])
    for key, (throughput, per_user) in ind.interactivity(home, eid, SLACK).items():
        assert points.loc[key, ["throughput", "per_user"]].tolist() == pytest.approx([throughput, per_user], rel=1e-9)
    pos = acceptance.by_position(rows)
    hist = acceptance.step_histogram(rows)
    proxy = acceptance.speedup_proxy(rows).set_index("workload")
    for w in WORKLOADS:
        d = ind.counter_deltas(home, eid, "candidate", w)
        got = pos[(pos["engine"] == "candidate") & (pos["workload"] == w)].set_index("position")
        assert len(got) >= 1 and got.index.tolist() == sorted(k for k in d if isinstance(k, int))
        for p in got.index:
            assert got.at[p, "rate"] == pytest.approx(d[p] / d["drafts"], rel=1e-12)
        steps = hist[(hist["engine"] == "candidate") & (hist["workload"] == w)]
        assert set(steps["source"]) == {acceptance.STEPS}
        assert steps["count"].tolist() == pytest.approx(ind.step_counts(d), rel=1e-12)
        stock = hist[(hist["engine"] == "stock") & (hist["workload"] == w)]
        assert set(stock["source"]) == {acceptance.CHUNKS}  # the stock engine drafts nothing
        assert dict(zip(stock["value"].astype(int), stock["count"].astype(int))) == ind.chunk_histogram(
            home, eid, "stock", w, SLACK
        )
        t_ar = ind.seconds_per_step(home, eid, "stock", w, SLACK)
        t_sd = ind.seconds_per_step(home, eid, "candidate", w, SLACK)
        al = 1 + d["accepted"] / d["drafts"]
        assert proxy.at[w, "proxy"] == pytest.approx(t_ar * al / t_sd, rel=1e-9)


def test_goodput_family_and_export_of_the_real_evaluation(real):
    home, eid, rows = real
    g = goodput.goodput(rows).set_index(["engine", "workload"])
    obj = goodput_objectives.DEFAULT
    for engine in ("candidate", "stock"):
        for w in WORKLOADS:
            want = ind.goodput(home, eid, engine, w, SLACK, obj[w].ttft_seconds, obj[w].tpot_seconds)
            assert g.at[(engine, w), "share"] == pytest.approx(want, rel=1e-12)
    fam = acceptance.by_family(rows)
    fam = fam[(fam["workload"] == "all") & (fam["app"] == "all")]
    if ind.raw(home, "sessions", eid).empty:  # a warehouse made before the runner wrote sessions rows
        assert fam["tokens_per_chunk"].isna().all() and fam["reason"].str.contains("no sessions row").all()
    else:
        for engine in ("candidate", "stock"):
            want = ind.tokens_per_chunk_by_family(home, eid, engine, SLACK)
            got = fam[fam["engine"] == engine].set_index("family")["tokens_per_chunk"]
            assert got.to_dict() == pytest.approx(want, rel=1e-12) and len(want) >= 1
    exported = pq.read_table(io.BytesIO(requests_parquet(home, eid))).to_pandas().set_index("request_id")
    raw = ind.timed_requests(home, eid, SLACK).set_index("request_id")
    assert sorted(exported.index) == sorted(raw.index)
    assert (exported["counted"] == raw.loc[exported.index, "counted"]).all()
    for rid in exported.index:
        assert np.array_equal(exported.at[rid, "chunk_times"], raw.at[rid, "chunk_times"])
