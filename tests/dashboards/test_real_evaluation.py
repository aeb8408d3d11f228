"""Every page of the board on a warehouse made by a real local evaluation: the runner drove the
development engine (n-gram speculation against the stock engine, SmolLM2-135M on CPU) through
the embedded task's passes and probes. Expected numbers are the scorer's over that warehouse."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest

from speculator_arena.dashboards import formatting as fmt
from speculator_arena.protocol import load_protocol
from speculator_arena.warehouse import Warehouse

from .conftest import TASK, page_text, scores_of_whole_warehouse

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def real(real_home):
    scores = scores_of_whole_warehouse(real_home)
    ev = scores.evaluations
    assert len(ev) >= 1
    row = ev.iloc[-1]
    assert row["status"] in ("measured", "failed"), (row["status"], row["void_reason"])
    return real_home, scores, row


def test_board_ranks_the_real_evaluation(app, real):
    home, _, row = real
    at = app(home, task=TASK, split="dev")
    assert not at.exception, [e.value for e in at.exception]
    table = next(m.value for m in at.markdown if m.value.startswith("| # | Participant"))
    line = next(ln for ln in table.splitlines() if f"evaluation={row['evaluation_id']}" in ln)
    assert fmt.score(row["specscore"]) in line
    for w in ("solo", "team", "busy"):
        assert f"| {fmt.ratio(row[f'r_{w}'])} |" in line
    # the detailed figures are in the board's CSV download (off the first page's narrow table)
    assert any(b.label == "Download the board's rows (CSV)" for b in at.get("download_button"))
    from speculator_arena.board.memo import BoardMemo
    from speculator_arena.dashboards import board_view

    csv = pd.read_csv(io.BytesIO(board_view.rows_csv(BoardMemo(str(home)), TASK, load_protocol().version, "dev")))
    mine = csv[csv["evaluation_id"] == row["evaluation_id"]].iloc[0]
    for figure in ("candidate_ttft_p50", "candidate_cache_hit_tokens", "stock_ttft_p50"):
        assert mine[figure] == pytest.approx(row[figure], rel=1e-9), figure


def test_evaluation_page_of_the_real_evaluation(app, real):
    home, scores, row = real
    eid = row["evaluation_id"]
    at = app(home, "evaluation", task=TASK, evaluation=eid)
    assert not at.exception, [e.value for e in at.exception]
    metric = {m.label: m.value for m in at.metric}
    assert metric["SpecScore"] == fmt.score(row["specscore"])
    tables = {tuple(t.value.columns): t.value for t in at.table}
    passes = next(v for k, v in tables.items() if "candidate tok/s" in k)
    want = scores.passes[scores.passes["evaluation_id"] == eid]
    assert sorted(passes["ratio"]) == sorted(want["ratio"].map(fmt.ratio))
    assert sorted(passes["candidate tok/s"]) == sorted(want["candidate_speed"].map(lambda x: fmt.num(x, 2)))
    gates = next(v for k, v in tables.items() if "verdict" in k)
    want_g = scores.gates[scores.gates["evaluation_id"] == eid].set_index("gate")
    for g in gates.itertuples():
        assert g.verdict == want_g.at[g.gate, "verdict"] and g.statistic == fmt.general(want_g.at[g.gate, "statistic"])
    wh = Warehouse(home)
    stored = wh.read_table("passes", eid).to_pandas()
    text = page_text(at)
    if (stored["memory_status"] == "sampled").any():
        assert "Budget = GPU_MEMORY_UTILIZATION" in text
    else:  # the CPU machine: the runner's own reason
        note = stored["memory_note"].dropna().iloc[0]
        assert f"Not measured: {note}"[:60] in text.replace("\\\\", "\\")
    workloads_with_chunks = {
        w
        for w, n in zip(
            wh.read_table("requests", eid).column("workload").to_pylist(),
            wh.read_table("requests", eid).column("chunk_times").to_pylist(),
        )
        if n and w in ("solo", "team", "busy")
    }
    assert len(at.get("vega_lite_chart")) >= len(workloads_with_chunks) > 0
    prov = json.loads(wh.read_table("evaluations", eid)["provenance"][0].as_py())
    assert json.loads(at.json[0].value) == prov


@pytest.mark.parametrize("page", ["references", "gap", "protocol", "data_card"])
def test_other_pages_on_the_real_warehouse(app, real, page):
    home = real[0]
    at = app(home, page, task=TASK, split="dev")
    assert not at.exception, [e.value for e in at.exception]
    text = page_text(at)
    if page == "gap":
        assert "needs both splits" in text
    if page == "data_card":
        card = home / "pools" / TASK / "data_card" / f"{TASK}.md"
        if card.is_file():
            heading = card.read_text().splitlines()[0].lstrip("# ").strip()
            assert heading.replace("`", "") in text.replace("`", "")
