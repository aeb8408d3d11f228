"""Every page of the board, run by Streamlit's AppTest on an empty and a synthetic warehouse."""

from __future__ import annotations

import pytest

from speculator_arena.dashboards import formatting as fmt
from speculator_arena.protocol import load_protocol
from speculator_arena.protocol.version_files import protocol_digest

from .conftest import TASK, page_text, scores_of_whole_warehouse

LATEST = load_protocol().version  # the latest shipped protocol version: what the board scores under
PASSES = load_protocol().task(TASK).passes_per_workload  # the synthetic evaluations' passes per workload

PAGES = ["board", "evaluation", "task", "references", "gap", "protocol", "data_card", "methodology", "sweep"]


def _no_exception(at):
    assert not at.exception, [e.value for e in at.exception]


@pytest.mark.parametrize("page", PAGES)
def test_every_page_explains_an_empty_warehouse(app, empty_home, page):
    at = app(empty_home, None if page == "board" else page)
    _no_exception(at)
    text = page_text(at)
    if page in ("board", "evaluation", "gap", "task"):
        assert "holds no evaluations yet" in text
    elif page == "methodology":
        assert "What void means" in text and f"./protocol?protocol={LATEST}" in text
    elif page == "references":
        assert "dev-ngram-4" in text or "qwen" in text  # the protocol's list still shows
    elif page == "sweep":
        assert "No sweep in" in text and "arena sweep --task" in text
    elif page == "protocol":
        assert protocol_digest(load_protocol().version) in text
    else:
        from speculator_arena.pools.builder.datacard import load_data_card

        task = at.sidebar.selectbox[0].value
        card = load_data_card(task, empty_home)  # the repository's data_cards/ copy, when it has one
        assert ("No data card has been built" in text) if card is None else (card.source.as_posix() in text)


def test_every_page_explains_a_missing_warehouse(app, tmp_path):
    at = app(tmp_path / "nowhere")
    _no_exception(at)
    assert "No warehouse at" in page_text(at)
    assert not (tmp_path / "nowhere").exists()  # the board created nothing


def _board_rows(at) -> list[str]:
    return [m.value for m in at.markdown if m.value.startswith("| # |")]


def test_board_ranks_last_finished_evaluations_by_specscore(app, synthetic_home):
    at = app(synthetic_home, task=TASK, split="dev")
    _no_exception(at)
    scores = scores_of_whole_warehouse(synthetic_home)
    ev = scores.evaluations.set_index("evaluation_id")
    participants, references = _board_rows(at)
    lines = [ln for ln in participants.splitlines()[2:]]
    # ranked order: alpha (its last dev evaluation, not the older faster one), then beta
    assert f"[alpha](./evaluation?evaluation=ev-alpha&protocol={LATEST})" in lines[0]
    assert lines[0].startswith("| 1 |")
    assert fmt.score(ev.at["ev-alpha", "specscore"]) in lines[0]
    assert f"| {fmt.ratio(ev.at['ev-alpha', 'r_solo'])} |" in lines[0]
    assert "[beta]" in lines[1] and lines[1].startswith("| 2 |")
    assert fmt.score(ev.at["ev-beta", "specscore"]) in lines[1]
    assert "alpha-old" not in participants
    # a missed gate: below the ranked ones, unranked, scored 0, saying which gate
    longer = next(ln for ln in lines if "[longer]" in ln)
    assert lines.index(longer) == 2 and longer.startswith(f"| {fmt.BLANK} |")
    assert "fail: length" in longer and fmt.score(0.0) in longer
    # references apart
    assert "[dev-ngram-4]" in references and fmt.score(ev.at["ev-ref-ngram", "specscore"]) in references
    assert "[dev-ngram-4]" not in participants
    # the running and void ones are not ranked but are named
    text = page_text(at)
    assert "Not on the board: 2 evaluation(s)" in text
    metric = {m.label: m.value for m in at.metric}
    assert metric["Leading SpecScore"] == fmt.score(ev.at["ev-alpha", "specscore"])
    # the SpecScore's interval beside it, as `arena board --text` writes it
    from speculator_arena.board.ranking import board_rows

    board = board_rows(scores, TASK, "dev").set_index("evaluation_id")
    assert participants.splitlines()[0] == (
        "| # | Participant | Account | SpecScore [95% interval] | r solo | r team | r busy | Status |"
    )
    assert (
        references.splitlines()[0] == "| # | Reference | SpecScore [95% interval] | r solo | r team | r busy | Status |"
    )
    assert (
        f"| {fmt.score(ev.at['ev-alpha', 'specscore'])} [{fmt.ratio(board.at['ev-alpha', 'interval_low'])}, "
        f"{fmt.ratio(board.at['ev-alpha', 'interval_high'])}] |"
    ) in lines[0]
    # the detailed figures are off the first page (on the evaluation page and in the CSV download)
    assert fmt.ms(ev.at["ev-alpha", "candidate_ttft_p50"]) not in participants
    # widened by the shipped calibration's max A/A error (v5 on), said so; the A/A check is on
    e = load_protocol().task(TASK).task.speed_noise.max_abs_error
    if e is None:
        assert "not widened: the max A/A error is not calibrated" in text and "A/A check: not calibrated" in text
    else:
        # (page_text is the elements' protobuf text, where the apostrophe of "task's" is escaped)
        assert f"calibrated max A/A error {e:.3f} (low" in text
        assert "A/A check: not calibrated" not in text and "A/A check: " in text


def _chart_rows(chart) -> list[list]:
    """The rows a board picture (an AppTest vega_lite_chart element) draws, from its own data."""
    import json

    import pyarrow as pa

    datasets = chart.proto.datasets
    assert len(datasets) >= 1
    frames = [pa.ipc.open_stream(d.data.data).read_all().to_pandas() for d in datasets]
    rows = next(f for f in frames if "entry" in f.columns)
    spec = json.loads(chart.proto.spec)
    assert "layer" in spec  # a layered interval plot, with the stock engine's line at 1.0
    assert any(layer.get("mark", {}).get("strokeDash") for layer in spec["layer"])
    return rows.sort_values("order")


def test_board_leads_with_a_picture_of_the_scores_and_intervals(app, synthetic_home):
    """The first thing on the board: each ranked entry's SpecScore and interval, participants and
    references apart, drawn from the rows the tables are made of (board_rows, with its ranks)."""
    from speculator_arena.board.ranking import board_rows

    at = app(synthetic_home, task=TASK, split="dev")
    _no_exception(at)
    scores = scores_of_whole_warehouse(synthetic_home)
    board = board_rows(scores, TASK, "dev")
    charts = at.get("vega_lite_chart")
    assert len(charts) == 2  # participants, then references
    # first on the page (its elements in the order drawn): before the metrics and the tables
    main = list(at.main)
    first_chart = next(i for i, e in enumerate(main) if getattr(e, "type", None) == "vega_lite_chart")
    first_metric = next(i for i, e in enumerate(main) if getattr(e, "type", None) == "metric")
    first_table = next(i for i, e in enumerate(main) if str(getattr(e, "value", "")).startswith("| # |"))
    assert first_chart < first_metric < first_table
    for chart, section in zip(charts, ("participants", "references"), strict=True):
        drawn = _chart_rows(chart)
        want = board[(board["section"] == section) & board["ranked"].fillna(False).astype(bool)]
        assert list(drawn["evaluation_id"]) == list(want["evaluation_id"])  # the board's order
        assert list(drawn["rank"]) == [fmt.rank(r, t) for r, t in zip(want["rank"], want["tie"], strict=True)]
        assert drawn["specscore"].tolist() == want["specscore"].astype(float).tolist()
        assert drawn["interval_low"].tolist() == want["interval_low"].astype(float).tolist()
        assert drawn["interval_high"].tolist() == want["interval_high"].astype(float).tolist()
        assert all(e.startswith(f"{r}  ") for e, r in zip(drawn["entry"], drawn["rank"], strict=True))
    assert [e.split("  ")[1] for e in _chart_rows(charts[0])["entry"]] == ["alpha", "beta"]


def test_board_download_and_evaluation_page_keep_every_figure(app, synthetic_home):
    """The figures the first page no longer shows (TTFT and TPOT p50/p90/p99, cache hit, acceptance,
    the gates, the gap flag) are in the board's CSV download, as the scorer holds them, for every
    row, and on each entry's evaluation page."""
    import io

    import pandas as pd

    from speculator_arena.board.memo import BoardMemo
    from speculator_arena.board.ranking import board_rows
    from speculator_arena.dashboards import board_view

    at = app(synthetic_home, task=TASK, split="dev")
    _no_exception(at)
    assert any(b.label == "Download the board's rows (CSV)" for b in at.get("download_button"))
    scores = scores_of_whole_warehouse(synthetic_home)
    board = board_rows(scores, TASK, "dev")
    got = pd.read_csv(io.BytesIO(board_view.rows_csv(BoardMemo(str(synthetic_home)), TASK, LATEST, "dev")))
    # the rows of the page's tables, in their order (participants, then references)
    import re

    linked = [m for table in _board_rows(at) for m in re.findall(r"evaluation=([^&)]+)", table)]
    assert list(got["evaluation_id"]) == linked and "ev-longer" in linked
    board = board.set_index("evaluation_id").loc[linked]
    figures = [f"candidate_{f}_{p}" for f in ("ttft", "tpot") for p in ("p50", "p90", "p99")] + [
        "candidate_cache_hit_tokens",
        "candidate_cache_hit_mean",
        "candidate_mean_acceptance_length",
        "candidate_draft_acceptance_rate",
    ]
    for col in figures + ["specscore", "interval_low", "interval_high", "r_solo", "r_team", "r_busy"]:
        want = pd.to_numeric(board[col], errors="coerce").astype(float)
        assert pd.Series(got[col].astype(float)).round(12).equals(want.round(12).reset_index(drop=True)), col
    for col in ("account_id", "failed_gates", "not_measured_gates", "gap_flag", "specscore_reason", "rank", "tie"):
        assert col in got.columns
    assert got.set_index("evaluation_id").at["ev-longer", "failed_gates"] == "length"
    assert bool(got.set_index("evaluation_id").at["ev-alpha", "gap_flag"])
    # each figure on the evaluation page (its ADR-0009 table, candidate, all workloads)
    ev = scores.evaluations.set_index("evaluation_id").loc["ev-alpha"]
    page = app(synthetic_home, "evaluation", evaluation="ev-alpha")
    table = next(t.value for t in page.table if "figure" in t.value.columns and "candidate" in t.value.columns)
    shown = dict(zip(table["figure"], table["candidate"], strict=True))
    names = {f"{f}_{p}": f"{f.upper()} {p} (s)" for f in ("ttft", "tpot") for p in ("p50", "p90", "p99")}
    names |= {
        "cache_hit_tokens": "cache hit, token-weighted",
        "cache_hit_mean": "cache hit, mean per request",
        "mean_acceptance_length": "mean acceptance length (engine's counters)",
        "draft_acceptance_rate": "draft acceptance rate (engine's counters)",
    }
    assert [f"candidate_{k}" for k in names] == figures
    for figure, name in names.items():
        assert shown[name] == fmt.general(ev[f"candidate_{figure}"]), figure


def test_board_test_split_shows_the_gap_flag(app, synthetic_home):
    at = app(synthetic_home, task=TASK, split="test")
    _no_exception(at)
    scores = scores_of_whole_warehouse(synthetic_home)
    ev = scores.evaluations.set_index("evaluation_id")
    assert bool(ev.at["ev-alpha-test", "gap_flag"])  # 0.65 vs 1.39: far below, even with v5's gap of 0.398
    participants = _board_rows(at)[0]
    row = next(ln for ln in participants.splitlines() if "ev-alpha-test" in ln)
    assert "FLAGGED" in row and fmt.score(ev.at["ev-alpha-test", "specscore"]) in row


def test_board_of_another_task(app, synthetic_home):
    at = app(synthetic_home, task="qwen3-8b", split="dev")
    _no_exception(at)
    assert "[gpu-run]" in _board_rows(at)[0]
    assert "alpha" not in _board_rows(at)[0]


def test_evaluation_page_shows_how_the_score_was_computed(app, synthetic_home):
    at = app(synthetic_home, "evaluation", evaluation="ev-alpha")
    _no_exception(at)
    scores = scores_of_whole_warehouse(synthetic_home)
    ev = scores.evaluations.set_index("evaluation_id").loc["ev-alpha"]
    metric = {m.label: m.value for m in at.metric}
    assert metric["SpecScore"] == fmt.score(ev["specscore"])
    for w in ("solo", "team", "busy"):
        assert metric[f"r_{w}"] == fmt.ratio(ev[f"r_{w}"])
    text = page_text(at)
    formula = (
        f"({fmt.ratio(ev['r_solo'])} · {fmt.ratio(ev['r_team'])} · {fmt.ratio(ev['r_busy'])})^(1/3) "
        f"= **{fmt.score(ev['specscore'])}**"
    )
    assert formula in text
    tables = {tuple(t.value.columns): t.value for t in at.table}
    passes = next(v for k, v in tables.items() if "ratio" in k and "candidate tok/s" in k)
    want = scores.passes[scores.passes["evaluation_id"] == "ev-alpha"]
    assert len(passes) == len(want) == 3 * PASSES
    assert sorted(passes["ratio"]) == sorted(want["ratio"].map(fmt.ratio))
    gates = next(v for k, v in tables.items() if "verdict" in k)
    want_g = scores.gates[scores.gates["evaluation_id"] == "ev-alpha"]
    assert sorted(gates["gate"]) == sorted(want_g["gate"])
    assert set(gates["verdict"]) <= {"pass", "not measured"}
    figures = next(v for k, v in tables.items() if "figure" in k and "candidate" in k)
    tps = scores.figures[
        (scores.figures["evaluation_id"] == "ev-alpha")
        & (scores.figures["engine"] == "candidate")
        & (scores.figures["figure"] == "output_tokens_per_second")
    ]["value"].iloc[0]
    assert fmt.general(tps) in set(figures["candidate"])
    # one throughput and one host-contention chart per workload, then the shown figures' five
    # (throughput against interactivity, each engine's tokens-per-chunk histogram: the synthetic
    # engines report no per-position counters; acceptance against prompt length and against the
    # turn), the entry's history (dashboards/history_section.py); memory not measured on the CPU
    # task, with the runner's note
    assert len(at.get("vega_lite_chart")) == 6 + 5 + 1
    assert "History of this entry" in text
    assert "Host contention" in text
    assert "Not measured: no NVIDIA device (synthetic)" in text
    assert f"Run under protocol **v{LATEST}**" in text
    import json

    from speculator_arena.warehouse import Warehouse

    stored = json.loads(Warehouse(synthetic_home).read_table("evaluations", "ev-alpha")["provenance"][0].as_py())
    assert json.loads(at.json[0].value) == stored


def test_evaluation_page_plots_memory_against_the_budget(app, synthetic_home):
    at = app(synthetic_home, "evaluation", evaluation="ev-gpu")
    _no_exception(at)
    text = page_text(at)
    tp = load_protocol().task("qwen3-8b")
    from speculator_arena.warehouse import Warehouse

    passes = Warehouse(synthetic_home).read_table("passes", "ev-gpu").to_pandas()
    total = passes["device_total_bytes"].dropna().iloc[0]
    budget = tp.engine_environment.gpu_memory_utilization * total + tp.gates.memory.slack_gib * (1 << 30)
    assert f"= {fmt.gib(budget)} (protocol section 7)" in text
    # throughput, memory, host contention per workload; the shown figures; the entry's history
    assert len(at.get("vega_lite_chart")) == 9 + 5 + 1


def test_evaluation_page_explains_a_partial_evaluation(app, synthetic_home):
    at = app(synthetic_home, "evaluation", evaluation="ev-partial")
    _no_exception(at)
    assert any("is running" in w.value for w in at.warning)
    metric = {m.label: m.value for m in at.metric}
    assert metric["SpecScore"] == fmt.BLANK
    counts = next(t.value for t in at.table if "rows stored" in t.value.columns)
    # both engines' passes, less the stock's last busy pass (the one missing)
    assert int(counts.set_index("raw table").at["passes", "rows stored"]) == 2 * 3 * PASSES - 1
    assert "incomplete" in page_text(at)


def test_evaluation_page_explains_a_void_evaluation(app, synthetic_home):
    at = app(synthetic_home, "evaluation", evaluation="ev-void")
    _no_exception(at)
    assert any("Void" in w.value and "did not come back idle" in w.value for w in at.warning)


def test_evaluation_page_unknown_id_and_select_box(app, synthetic_home):
    at = app(synthetic_home, "evaluation", evaluation="no-such-evaluation", task=TASK)
    _no_exception(at)
    assert any("No evaluation 'no-such-evaluation'" in e.value for e in at.error)
    # the select box falls back to the task's newest evaluation and can choose another
    box = next(s for s in at.selectbox if s.label == "Evaluation")
    box.select("ev-beta").run()
    _no_exception(at)
    assert at.query_params["evaluation"] == ["ev-beta"] or at.query_params["evaluation"] == "ev-beta"
    assert any(h.value == "beta" for h in at.header)


def test_references_page(app, synthetic_home):
    at = app(synthetic_home, "references", task=TASK, split="dev")
    _no_exception(at)
    listed = next(t.value for t in at.table if "reference" in t.value.columns)
    refs = {r.name for r in load_protocol().tasks[TASK].references}
    assert set(listed["reference"]) == refs
    assert listed.set_index("reference").at["dev-ngram-4", "measured on dev"] == "yes"
    assert listed.set_index("reference").at["dev-self-draft", "measured on dev"] == "not yet"
    scores = scores_of_whole_warehouse(synthetic_home)
    ev = scores.evaluations.set_index("evaluation_id")
    assert fmt.score(ev.at["ev-ref-ngram", "specscore"]) in page_text(at)


def test_gap_page(app, synthetic_home):
    at = app(synthetic_home, "gap", task=TASK)
    _no_exception(at)
    table = next(m.value for m in at.markdown if m.value.startswith("| Account |"))
    row = next(ln for ln in table.splitlines() if "acct-a" in ln)
    scores = scores_of_whole_warehouse(synthetic_home)
    ev = scores.evaluations.set_index("evaluation_id")
    gap = load_protocol().task(TASK).dev_test_gap  # the task's own (calibrated) gap
    assert fmt.score(ev.at["ev-alpha", "specscore"]) in row
    assert fmt.score(ev.at["ev-alpha-test", "specscore"]) in row
    assert fmt.score((1 - gap) * ev.at["ev-alpha", "specscore"]) in row
    assert row.rstrip(" |").endswith("FLAGGED")
    beta = next(ln for ln in table.splitlines() if "acct-b" in ln)
    assert "needs both splits" in beta
    assert {m.label: m.value for m in at.metric}["Accounts flagged"].startswith("1 of")


def test_protocol_page_and_version_differences(app, synthetic_home, tmp_path, monkeypatch):
    staged = tmp_path / "versions"
    staged.mkdir()
    from importlib import resources

    import yaml

    nxt = LATEST + 1
    doc = yaml.safe_load((resources.files("speculator_arena.protocol") / "versions" / f"v{LATEST}.yaml").read_text())
    doc["version"] = nxt
    doc["gates"]["length"]["bound"] = 0.5
    (staged / f"v{nxt}.yaml").write_text(yaml.safe_dump(doc))
    monkeypatch.setenv("ARENA_PROTOCOL_DIR", str(staged))
    at = app(synthetic_home, "protocol")
    _no_exception(at)
    text = page_text(at)
    assert protocol_digest(nxt) in text
    diff = next(t.value for t in at.table if "value" in t.value.columns and f"v{LATEST}" in t.value.columns)
    assert list(diff["value"]) == ["gates.length.bound", "version"]
    assert diff.set_index("value").at["gates.length.bound", f"v{nxt}"] == "0.5"

    # the board under the staged version: the longer replies are within the looser length bound and rank first
    at = app(synthetic_home, task=TASK, split="dev", protocol=nxt)
    _no_exception(at)
    v2 = scores_of_whole_warehouse(synthetic_home, protocol_version=nxt).evaluations.set_index("evaluation_id")
    first = _board_rows(at)[0].splitlines()[2]
    assert "[longer]" in first and fmt.score(v2.at["ev-longer", "specscore"]) in first
    assert f"Scored under protocol v{nxt}" in page_text(at)


def test_data_card_page_shows_the_public_card_only(app, tmp_path):
    home = tmp_path / "home"
    pool = home / "pools" / TASK
    (pool / "hidden").mkdir(parents=True)
    (pool / "data_card").mkdir()
    (pool / "data_card" / f"{TASK}.md").write_text(
        "# Data card of local-smollm2\n\nSources: ShareGPT (public), 123 sessions.\n"
    )
    (pool / "data_card" / f"{TASK}.json").write_text('{"sessions": 123}')
    (pool / "hidden" / "data_card.md").write_text("HIDDEN-CARD-MARKER")
    (pool / "hidden" / "sessions.jsonl").write_text('{"text": "HIDDEN-POOL-MARKER"}')
    at = app(home, "data_card", task=TASK)
    _no_exception(at)
    text = page_text(at)
    assert "Sources: ShareGPT (public), 123 sessions." in text
    assert '"sessions": 123' in text or "123" in str([j.value for j in at.json])
    assert "HIDDEN" not in text


def test_board_caches_reads_but_sees_new_evaluations_after_refresh(app, tmp_path):
    from synthetic import write_synthetic_evaluation

    from speculator_arena.warehouse import Warehouse

    home = tmp_path / "growing"
    wh = Warehouse(home)
    write_synthetic_evaluation(wh, "g-1", account_id="acct-1", label="first", seed=11)
    at = app(home, task=TASK, split="dev")
    assert "[first]" in _board_rows(at)[0]
    write_synthetic_evaluation(wh, "g-2", account_id="acct-2", label="second", seed=12, created_at=1.9e9)
    at.run()
    _no_exception(at)
    assert "[second]" not in _board_rows(at)[0]  # cached within the TTL
    next(b for b in at.sidebar.button if b.label == "Refresh").click().run()
    _no_exception(at)
    assert "[second]" in _board_rows(at)[0]


def test_a_render_after_the_ttl_formats_nothing_again_until_an_evaluation_lands(app, tmp_path, monkeypatch):
    """Issue 36: what the board page writes is made once per board the memo computed
    (dashboards/board_view.py). A render after Streamlit's caches expired, with nothing landed,
    formats no table again and shows the same page; once an evaluation lands, the next render
    after the TTL shows it."""
    import streamlit as st
    from synthetic import write_synthetic_evaluation

    from speculator_arena.dashboards import board_table
    from speculator_arena.warehouse import Warehouse

    home = tmp_path / "expiring"
    wh = Warehouse(home)
    write_synthetic_evaluation(wh, "x-1", account_id="acct-1", label="first", seed=11)
    made = []
    real = board_table.markdown
    monkeypatch.setattr(board_table, "markdown", lambda *a, **k: made.append(1) or real(*a, **k))
    at = app(home, task=TASK, split="dev")
    _no_exception(at)

    def shown_of(at):
        return [m.value for m in at.markdown], [(m.label, m.value) for m in at.metric], [c.value for c in at.caption]

    shown, tables = shown_of(at), len(made)
    assert "[first]" in _board_rows(at)[0] and tables >= 1
    st.cache_data.clear()  # what the TTL's expiry does (the memo, a cache_resource, stays)
    at.run()
    _no_exception(at)
    assert len(made) == tables  # nothing formatted again
    assert shown_of(at) == shown
    write_synthetic_evaluation(wh, "x-2", account_id="acct-2", label="second", seed=12, created_at=1.9e9)
    st.cache_data.clear()
    at.run()
    _no_exception(at)
    assert "[second]" in _board_rows(at)[0] and len(made) > tables


def test_a_link_to_an_evaluation_opens_its_task(app, synthetic_home):
    at = app(synthetic_home, "evaluation", evaluation="ev-alpha")  # newest task is qwen3-8b
    assert at.sidebar.selectbox[0].value == TASK
    assert any(h.value == "alpha" for h in at.header)
    table = next(t.value for t in at.table if "candidate tok/s" in t.value.columns)
    assert list(table["workload"]) == ["solo"] * PASSES + ["team"] * PASSES + ["busy"] * PASSES


def test_evaluation_page_shows_the_figures_shown_beside_the_score(app, synthetic_home):
    """Throughput against interactivity, acceptance (in detail, as the context grows), goodput, the export
    and the speculation profile's download, as board/ computes them."""
    from speculator_arena.board import acceptance, context, curves, goodput, shown

    at = app(synthetic_home, "evaluation", evaluation="ev-alpha")
    _no_exception(at)
    text = page_text(at)
    for heading in ("Throughput against interactivity", "Acceptance in detail", "Goodput", "Per-request rows"):
        assert heading in text
    assert "three regimes are the curve" in text
    rows = shown.read_shown(synthetic_home, ["ev-alpha"])
    tables = {tuple(t.value.columns): t.value for t in at.table}
    curve = next(v for k, v in tables.items() if "per-user (tok/s per lane)" in k)
    want = curves.interactivity_points(rows)
    assert sorted(curve["throughput (tok/s)"]) == sorted(want["throughput"].map(lambda x: fmt.num(x, 2)))
    good = next(v for k, v in tables.items() if "goodput" in k)
    assert sorted(good["goodput"]) == sorted(goodput.goodput(rows)["share"].map(fmt.pct))
    family = next(v for k, v in tables.items() if "family" in k).set_index(["family", "app"])
    assert {("agent", "all"), ("chat", "all"), ("agent", "mini-swe-agent")} <= set(family.index)
    want = acceptance.by_family(rows)
    want = want[(want["family"] == "chat") & (want["app"] == "all") & (want["workload"] == "team")]
    cell = " / ".join(
        fmt.ratio(want.loc[want["engine"] == e, "tokens_per_chunk"].iloc[0]) for e in ("candidate", "stock")
    )
    assert family.at[("chat", "all"), "team"] == cell
    assert f"protocol v{LATEST} sets no goodput objectives" in text
    parquet, profile = at.get("download_button")
    assert "per-request rows (Parquet)" in str(parquet.proto)
    assert "speculation_profile.json" in str(profile.proto)
    # acceptance as the context grows: the read model's numbers, families apart, its source said
    assert "Acceptance as the context grows" in text and "exact only for engines that stream one chunk per step" in text
    ctx = next(v for k, v in tables.items() if "tokens per chunk" in k and "axis" in k)
    want = context.by_context(rows)
    want = want[(want["engine"] == "candidate") & (want["workload"] == "all") & (want["axis"] == "turn")]
    got = ctx[(ctx["engine"] == "candidate") & (ctx["axis"] == "turn")]
    assert set(got["family"]) == {"agent", "chat"}
    assert sorted(got["tokens per chunk"]) == sorted(want["acceptance_length"].map(fmt.ratio))
    # a test evaluation's page offers no export and no profile, and says why
    at = app(synthetic_home, "evaluation", evaluation="ev-alpha-test")
    _no_exception(at)
    text = page_text(at)
    assert not at.get("download_button") and "Not exported for test evaluations" in text
    assert "Not published for test evaluations" in text
    assert "Not shown for test evaluations: requests binned by prompt length and turn" in text


def test_task_page_draws_the_references_and_the_chosen_entry(app, synthetic_home):
    from speculator_arena.board import curves, shown

    at = app(synthetic_home, "task", task=TASK, split="dev")
    _no_exception(at)
    text = page_text(at)
    assert "three regimes are the curve" in text and len(at.get("vega_lite_chart")) == 1
    table = next(m.value for m in at.markdown if m.value.startswith("| curve |"))
    assert "dev-ngram-4" in table and "(reference)" in table and "alpha" in table  # the leader by default
    want = curves.interactivity_points(shown.read_shown(synthetic_home, ["ev-ref-ngram", "ev-alpha"]))
    for value in want["per_user"]:
        assert f"| {fmt.num(value, 2)} |" in table
    box = next(s for s in at.selectbox if s.label == "Entry beside the references")
    box.select("ev-beta").run()
    _no_exception(at)
    table = next(m.value for m in at.markdown if m.value.startswith("| curve |"))
    assert "[beta]" in table and "[alpha]" not in table


def test_methodology_page_states_the_protocol_s_values(app, synthetic_home):
    at = app(synthetic_home, "methodology", task=TASK)
    _no_exception(at)
    text = page_text(at)
    t = load_protocol().task(TASK)
    for words in (
        "Why the arena counts tokens itself",
        "Why counters are read around each pass",
        "ignore_eos",
        "Why the same pod and the same sessions",
        "What the gates catch",
        "What void means",
        f"{t.workloads['busy'].pass_seconds:g} s per pass",
        f"max_tokens + {t.count_slack_tokens} tokens",
    ):
        assert words in text, words


def test_board_picture_draws_the_best_ranked_and_tells_equal_labels_apart():
    """The picture's rows (board_table.interval_rows): ranked entries only, in the board's order, the
    first `limit`; two entries of one label are told apart by their accounts; one x scale holds 1.0."""
    import pandas as pd

    from speculator_arena.dashboards import board_table, charts

    rows = pd.DataFrame(
        {
            "section": "participants",
            "rank": pd.array([1, 1, 3, None], dtype="Int64"),
            "tie": [True, True, False, False],
            "label": ["same", "same", "third", "failed"],
            "account_id": ["acct-1", "acct-2", "acct-3", "acct-4"],
            "evaluation_id": ["e1", "e2", "e3", "e4"],
            "specscore": [1.5, 1.4, 1.1, 0.0],
            "interval_low": [1.3, 1.2, 1.05, 0.0],
            "interval_high": [1.7, 1.6, 1.15, 0.0],
            "ranked": [True, True, True, False],
        },
        index=[7, 8, 9, 10],
    )
    drawn = board_table.interval_rows(rows)
    assert list(drawn["entry"]) == ["1=  same (acct-1)", "1=  same (acct-2)", "3  third"]
    assert list(drawn["score_text"]) == ["1.5000 [1.300, 1.700]", "1.4000 [1.200, 1.600]", "1.1000 [1.050, 1.150]"]
    assert list(board_table.interval_rows(rows, limit=2)["evaluation_id"]) == ["e1", "e2"]
    assert board_table.interval_rows(rows.iloc[3:]).empty
    low, high = charts.board_domain(drawn, board_table.interval_rows(rows.iloc[3:]))
    assert low < 1.0 and high > 1.7  # 1.0 (the stock engine) within, though every interval lies above it
    charts.board_intervals(drawn, [low, high]).to_dict()  # a valid Vega-Lite spec
