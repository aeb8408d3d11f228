"""The figures shown beside a score (issue 20), each checked against tests/board/independent_shown.py's
plain recomputation from the raw Parquet, on synthetic evaluations with known faults planted: a
pass missing, a counter unread, per-position counts that are not a prefix, a request without chunk
times, an evaluation without sessions rows. Each fault blanks what it must, with the reason, and
nothing else; a candidate that fails its slow requests does not raise its goodput."""

from __future__ import annotations

import math

import independent_shown as ind
import pandas as pd
import pyarrow as pa
import pytest
import yaml
from synthetic import POSITION_SHARES, write_synthetic_evaluation

from speculator_arena.board import acceptance, curves, goodput, goodput_objectives, shown
from speculator_arena.protocol import load_protocol
from speculator_arena.warehouse import Warehouse
from speculator_arena.warehouse.schema import TABLES

SLACK = load_protocol().count_slack_tokens
WORKLOADS = ("solo", "team", "busy")


def _rewrite(wh: Warehouse, table: str, eid: str, keep) -> None:
    """Replace one evaluation's rows of a table by `keep(frame)` (a planted fault)."""
    df = keep(wh.read_table(table, eid).to_pandas())
    wh.write_rows(table, eid, pa.Table.from_pandas(df, schema=TABLES[table], preserve_index=False), replace=True)


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    wh = Warehouse(tmp_path_factory.mktemp("shown") / "arena_home")
    for i, eid in enumerate(("pos", "gap", "unread", "notprefix", "nochunks")):
        write_synthetic_evaluation(wh, eid, account_id=f"acct-{eid}", label=eid, seed=40 + i, per_position=True)
    write_synthetic_evaluation(wh, "plain", account_id="acct-plain", label="plain", seed=50)
    write_synthetic_evaluation(wh, "running", account_id="acct-run", label="running", seed=51, attack="partial")
    _rewrite(wh, "passes", "gap", lambda d: d[~((d["engine"] == "candidate") & (d["pass_id"] == "busy-1"))])
    _rewrite(
        wh,
        "metrics",
        "unread",
        lambda d: d[~((d["pass_id"] == "team-0") & (d["phase"] == "before") & d["name"].str.contains("per_pos"))],
    )

    def not_prefix(d):
        later = d["name"].str.contains("per_pos") & d["labels"].str.contains('"2"') & (d["phase"] == "after")
        d.loc[later & (d["pass_id"] == "solo-0"), "value"] += 1000.0  # position 2 accepts more than 1
        return d

    _rewrite(wh, "metrics", "notprefix", not_prefix)

    def no_chunks(d):
        first = d.index[(d["engine"] == "stock") & (d["pass_id"] == "team-1")][0]
        d.at[first, "chunk_times"] = []
        d.at[first, "chunk_tokens"] = []
        return d

    _rewrite(wh, "requests", "nochunks", no_chunks)
    write_synthetic_evaluation(wh, "nosessions", account_id="acct-nosessions", label="nosessions", seed=45)
    _rewrite(wh, "sessions", "nosessions", lambda d: d.iloc[:0])
    return wh.home


@pytest.fixture(scope="module")
def rows(home):
    ids = ["pos", "gap", "unread", "notprefix", "nochunks", "nosessions", "plain", "running"]
    return shown.read_shown(home, ids)


def _one(df: pd.DataFrame, **match) -> pd.DataFrame:
    m = pd.Series(True, index=df.index)
    for k, v in match.items():
        m &= df[k] == v
    return df[m]


def test_throughput_against_interactivity_is_the_busy_window_pooled(home, rows):
    points = curves.interactivity_points(rows)
    for eid in ("pos", "plain"):
        want = ind.interactivity(home, eid, SLACK)
        for (engine, workload), (throughput, per_user) in want.items():
            got = _one(points, evaluation_id=eid, engine=engine, workload=workload).iloc[0]
            assert got["throughput"] == pytest.approx(throughput, rel=1e-9)
            assert got["per_user"] == pytest.approx(per_user, rel=1e-9)
            assert pd.isna(got["reason"])
    # the synthetic candidate replays the stock timeline faster: its curve lies above the stock one
    c = _one(points, evaluation_id="pos", engine="candidate").set_index("workload")
    s = _one(points, evaluation_id="pos", engine="stock").set_index("workload")
    assert (c["throughput"] > s["throughput"]).all()


def test_a_missing_pass_blanks_that_engine_and_workload_only(rows):
    points = curves.interactivity_points(rows)
    gap = _one(points, evaluation_id="gap")
    blank = gap[gap["throughput"].isna()]
    assert list(zip(blank["engine"], blank["workload"])) == [("candidate", "busy")]
    assert blank["reason"].iloc[0] == "candidate passes missing or aborted in busy"
    pos = acceptance.by_position(rows)
    assert _one(pos, evaluation_id="gap", engine="candidate", workload="team")["rate"].notna().all()
    assert (
        "busy: candidate passes missing"
        in _one(pos, evaluation_id="gap", engine="candidate", workload="all")["reason"].iloc[0]
    )
    run = _one(points, evaluation_id="running")
    assert run["throughput"].isna().all() and (run["reason"] == "incomplete: evaluation is running").all()


def test_acceptance_by_position_differences_the_counters_around_each_pass(home, rows):
    pos = acceptance.by_position(rows)
    for workload in WORKLOADS:
        d = ind.counter_deltas(home, "pos", "candidate", workload)
        got = _one(pos, evaluation_id="pos", engine="candidate", workload=workload).set_index("position")
        assert list(got.index) == [0, 1, 2]
        for p, share in enumerate(POSITION_SHARES):
            assert got.at[p, "accepted"] == pytest.approx(d[p], rel=1e-12)
            assert got.at[p, "drafts"] == pytest.approx(d["drafts"], rel=1e-12)
            assert got.at[p, "rate"] == pytest.approx(share, rel=1e-9)
            before = d["drafts"] if p == 0 else d[p - 1]
            assert got.at[p, "conditional"] == pytest.approx(d[p] / before, rel=1e-12)
    # the stock engine and an engine without per-position counters: blank, with the reason
    for eid, engine in (("pos", "stock"), ("plain", "candidate")):
        blank = _one(pos, evaluation_id=eid, engine=engine, workload="solo")
        assert len(blank) == 1 and blank["rate"].isna().all()
        assert "no per-position counters" in blank["reason"].iloc[0]
    unread = _one(pos, evaluation_id="unread", engine="candidate")
    assert _one(unread, workload="team")["reason"].iloc[0] == "counters not read before and after every pass"
    assert _one(unread, workload="solo")["rate"].notna().all()


def test_the_step_histogram_is_the_counters_where_reported_else_the_chunks(home, rows):
    hist = acceptance.step_histogram(rows)
    for workload in WORKLOADS:
        want = ind.step_counts(ind.counter_deltas(home, "pos", "candidate", workload))
        got = _one(hist, evaluation_id="pos", engine="candidate", workload=workload)
        assert set(got["source"]) == {acceptance.STEPS}
        assert got["count"].tolist() == pytest.approx(want, rel=1e-9)
        assert got["share"].sum() == pytest.approx(1.0)
        # stock: no per-position counters, so the arena's tokens per chunk, labelled as such
        stock = _one(hist, evaluation_id="pos", engine="stock", workload=workload)
        assert set(stock["source"]) == {acceptance.CHUNKS}
        assert dict(zip(stock["value"].astype(int), stock["count"].astype(int))) == ind.chunk_histogram(
            home, "pos", "stock", workload, SLACK
        )
        assert "no per-position counters" in stock["note"].iloc[0]
    bad = _one(hist, evaluation_id="notprefix", engine="candidate", workload="solo")
    assert set(bad["source"]) == {acceptance.CHUNKS} and "not a prefix acceptance" in bad["note"].iloc[0]
    assert set(_one(hist, evaluation_id="notprefix", engine="candidate", workload="team")["source"]) == {
        acceptance.STEPS
    }
    stock_team = _one(hist, evaluation_id="nochunks", engine="stock", workload="team")
    assert len(stock_team) == 1 and stock_team["reason"].iloc[0] == "1 counted requests lack chunk times"


def test_acceptance_by_family_and_app_joins_the_sessions_rows(home, rows):
    fam = acceptance.by_family(rows)
    for engine in ("candidate", "stock"):
        want = ind.tokens_per_chunk_by_family(home, "pos", engine, SLACK)
        got = _one(fam, evaluation_id="pos", engine=engine, workload="all", app="all").set_index("family")
        assert set(got.index) == set(want) == {"agent", "chat"}
        for family, value in want.items():
            assert got.at[family, "tokens_per_chunk"] == pytest.approx(value, rel=1e-12)
    apps = _one(fam, evaluation_id="pos", engine="candidate", workload="all")
    assert set(apps["app"]) == {"mini-swe-agent", "tau-bench-airline", "all"}
    blank = _one(fam, evaluation_id="nosessions", engine="candidate", workload="solo")
    assert len(blank) == 1 and "have no sessions row" in blank["reason"].iloc[0]


def test_the_speedup_proxy_is_speed_bench_s_formula(home, rows):
    proxy = acceptance.speedup_proxy(rows).set_index(["evaluation_id", "workload"])
    for workload in WORKLOADS:
        t_ar = ind.seconds_per_step(home, "pos", "stock", workload, SLACK)
        t_sd = ind.seconds_per_step(home, "pos", "candidate", workload, SLACK)
        d = ind.counter_deltas(home, "pos", "candidate", workload)
        al = 1 + d["accepted"] / d["drafts"]
        got = proxy.loc[("pos", workload)]
        assert (got["t_ar"], got["t_sd"], got["acceptance_length"]) == pytest.approx((t_ar, t_sd, al), rel=1e-9)
        assert got["proxy"] == pytest.approx(t_ar * al / t_sd, rel=1e-9)
    assert "stock: 1 counted requests lack chunk times" in proxy.loc[("nochunks", "team"), "reason"]
    assert math.isnan(proxy.loc[("nochunks", "team"), "proxy"])


@pytest.fixture
def tight_goodput(tmp_path, monkeypatch):
    """A staged version with goodput objectives that the synthetic requests meet only in part."""
    latest = load_protocol().version
    doc = load_protocol(latest).model_dump(mode="json")
    doc["version"] = latest + 1
    doc["goodput"] = {w: {"ttft_seconds": 0.25, "tpot_seconds": 0.03} for w in WORKLOADS}
    (tmp_path / f"v{latest + 1}.yaml").write_text(yaml.safe_dump(doc))
    monkeypatch.setenv("ARENA_PROTOCOL_DIR", str(tmp_path))
    return latest + 1


def test_goodput_counts_counted_requests_within_the_objectives(home, tight_goodput):
    rows = shown.read_shown(home, ["pos", "nochunks"], tight_goodput)
    assert set(rows.objectives["source"]) == {f"protocol v{tight_goodput}"}
    g = goodput.goodput(rows)
    shares = []
    for engine in ("candidate", "stock"):
        for workload in WORKLOADS:
            want = ind.goodput(home, "pos", engine, workload, SLACK, 0.25, 0.03)
            got = _one(g, evaluation_id="pos", engine=engine, workload=workload).iloc[0]
            assert got["share"] == pytest.approx(want, rel=1e-12)
            shares.append(want)
    assert any(0 < x < 1 for x in shares)  # the objectives cut: the check can fail
    assert _one(g, evaluation_id="nochunks", engine="stock", workload="team")["reason"].iloc[0] == (
        "1 counted requests lack chunk times"
    )
    # without objectives in the version (v1, v2), the board's default, said so
    default = shown.read_shown(home, ["pos"], 2).objectives
    assert set(default["source"]) == {"the board's default: protocol v2 sets no goodput objectives"}
    assert set(default["ttft_seconds"]) == {goodput_objectives.DEFAULT["solo"].ttft_seconds}


def test_failing_slow_requests_does_not_raise_goodput(tmp_path, tight_goodput):
    """A hostile candidate that fails (drops) every request it would miss the objectives with gains
    nothing: the share is over every timed request, so it stays what it was."""
    wh = Warehouse(tmp_path / "h")
    write_synthetic_evaluation(wh, "honest", seed=60)
    write_synthetic_evaluation(wh, "dropper", seed=60)
    slow = ind.timed_requests(wh.home, "dropper", SLACK)
    slow = slow[(slow["engine"] == "candidate") & (slow["first_token_at"] - slow["sent_at"] > 0.25)]
    assert len(slow) > 0
    _rewrite(
        wh,
        "requests",
        "dropper",
        lambda d: d.assign(done=~d["request_id"].isin(slow["request_id"]) & d["done"]),
    )
    g = goodput.goodput(shown.read_shown(wh.home, ["honest", "dropper"], tight_goodput))
    for workload in (*WORKLOADS, "all"):
        honest = _one(g, evaluation_id="honest", engine="candidate", workload=workload)["share"].iloc[0]
        dropper = _one(g, evaluation_id="dropper", engine="candidate", workload=workload)["share"].iloc[0]
        assert dropper == pytest.approx(honest, rel=1e-12)


def test_a_protocol_s_goodput_must_name_every_workload():
    from speculator_arena.protocol.model import Protocol

    doc = load_protocol().model_dump(mode="json")
    doc["goodput"] = {"solo": {"ttft_seconds": 1.0, "tpot_seconds": 0.05}}
    with pytest.raises(ValueError, match="goodput must name exactly"):
        Protocol.model_validate(doc)
    doc["goodput"] = None
    doc["tasks"]["local-smollm2"]["goodput"] = {w: {"ttft_seconds": 3.0, "tpot_seconds": 0.2} for w in WORKLOADS}
    proto = Protocol.model_validate(doc)
    assert proto.task("local-smollm2").goodput["busy"].tpot_seconds == 0.2
    assert proto.task("qwen3-8b").goodput is None
