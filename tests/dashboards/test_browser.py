"""A real headless Chromium loads the served board and an evaluation page; the rendered text must
show the numbers the warehouse holds (as the scorer computes them). Screenshots are kept under
test-artifacts/board/ (gitignored; CI uploads them)."""

from __future__ import annotations

from pathlib import Path

import pytest
from browser_pages import ARGS, ARTIFACTS, CHROMIUM, Served, expect  # tests/ is on sys.path (conftest)

from speculator_arena.dashboards import formatting as fmt

from .conftest import scores_of_whole_warehouse

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed at /usr/bin/chromium"),
]


@pytest.fixture(scope="module")
def browser():
    pw = pytest.importorskip("playwright.sync_api")
    with pw.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield b
        b.close()


def _row_cells(page, label: str) -> list[str]:
    return [
        c.strip()
        for c in page.locator("table tr")
        .filter(has=page.get_by_role("link", name=label, exact=True))
        .first.locator("td")
        .all_inner_texts()
    ]


def _check_served_board(browser, home: Path, evaluation_id: str, name: str, shared: tuple[str, ...] = ()) -> None:
    """`shared`: labels of participants the board must show sharing rank 1 (their intervals overlap)."""
    from speculator_arena.board.ranking import board_rows

    scores = scores_of_whole_warehouse(home)
    ev = scores.evaluations.set_index("evaluation_id")
    row = ev.loc[evaluation_id]
    split = row["split"]
    specscore = fmt.score(row["specscore"])
    board = board_rows(scores, row["task_id"], split).set_index("evaluation_id")
    ranked = board.loc[evaluation_id]
    assert ranked["interval_low"] <= row["specscore"] <= ranked["interval_high"]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    served = Served(home)
    try:
        page = browser.new_page(viewport={"width": 1600, "height": 1200})
        page.goto(f"{served.url}/?task={row['task_id']}&split={split}")
        page.get_by_text("Participants", exact=True).first.wait_for(timeout=90_000)
        page.get_by_role("link", name=str(row["label"])).first.wait_for(timeout=90_000)
        expect(page.locator("body")).to_contain_text(specscore, timeout=90_000)
        page.screenshot(path=str(ARTIFACTS / f"{name}-board.png"), full_page=True)
        cells = _row_cells(page, str(row["label"]))
        assert fmt.ratio(row["r_solo"]) in cells and fmt.ratio(row["r_busy"]) in cells
        # the shared rank and the SpecScore's interval, as board.ranking.board_rows computes them
        assert cells[0] == fmt.rank(ranked["rank"], ranked["tie"])
        interval = f"[{fmt.ratio(ranked['interval_low'])}, {fmt.ratio(ranked['interval_high'])}]"
        assert cells[3] == f"{specscore} {interval}"
        for label in shared:
            other = board[board["label"] == label].iloc[0]
            assert other["rank"] == 1 and other["tie"]
            got = _row_cells(page, label)
            assert got[0] == "1=" and got[3] == (
                f"{fmt.score(other['specscore'])} [{fmt.ratio(other['interval_low'])}, "
                f"{fmt.ratio(other['interval_high'])}]"
            )

        page.goto(f"{served.url}/evaluation?evaluation={evaluation_id}")
        body = page.locator("body")
        expected = [specscore] + [fmt.ratio(row[f"r_{w}"]) for w in ("solo", "team", "busy")]
        passes = scores.passes[scores.passes["evaluation_id"] == evaluation_id]
        expected += [fmt.ratio(r) for r in passes["ratio"].dropna()]
        for value in expected:  # retried until the page has rendered it (elements stream in)
            expect(body).to_contain_text(value, timeout=90_000)
        expect(page.get_by_text("Figures (ADR-0009)").first).to_be_visible(timeout=90_000)
        _check_shown_figures(page, home, evaluation_id, split)
        page.wait_for_timeout(1500)  # let the charts draw before the screenshot
        page.screenshot(path=str(ARTIFACTS / f"{name}-evaluation.png"), full_page=True)

        # the task page: the references' and the leading entry's throughput-interactivity curves
        page.goto(f"{served.url}/task?task={row['task_id']}&split={split}")
        expect(page.get_by_text("Throughput against interactivity").first).to_be_visible(timeout=90_000)
        _expect_curves(page, home, board)
        expect(page.locator("[data-testid='stVegaLiteChart']").first).to_be_visible()
        page.wait_for_timeout(1500)
        page.screenshot(path=str(ARTIFACTS / f"{name}-task.png"), full_page=True)

        page.goto(f"{served.url}/methodology")
        for words in (
            "Why the arena counts tokens itself",
            "Why counters are read around each pass",
            "What void means",
        ):
            expect(page.get_by_text(words).first).to_be_visible(timeout=90_000)
        expect(page.get_by_role("link", name="the protocol").first).to_be_visible()
        page.screenshot(path=str(ARTIFACTS / f"{name}-methodology.png"), full_page=True)
        page.close()
    finally:
        served.stop()
    for shot in ("board", "evaluation", "task", "methodology"):
        assert (ARTIFACTS / f"{name}-{shot}.png").stat().st_size > 10_000, shot


def _check_shown_figures(page, home: Path, evaluation_id: str, split: str) -> None:
    """The evaluation page's figures shown beside the score (board/curves.py, acceptance.py,
    goodput.py) and, for a dev evaluation, the export: downloaded and read back as Parquet."""
    import io

    import pyarrow.parquet as pq

    from speculator_arena.board import curves, goodput, shown

    body = page.locator("body")
    for heading in (
        "Throughput against interactivity",
        "Acceptance by draft position",
        "Histogram per verification step, else per chunk",
        "By session family and app",
        "Goodput",
    ):
        expect(page.get_by_text(heading).first).to_be_visible(timeout=90_000)
    # the page's throughput and contention charts per workload (6), then the curve and each engine's
    # histogram at least (3)
    page.wait_for_function("document.querySelectorAll(\"[data-testid='stVegaLiteChart']\").length >= 9")
    rows = shown.read_shown(home, [evaluation_id])
    for value in curves.interactivity_points(rows)["per_user"].dropna():
        expect(body).to_contain_text(fmt.num(value, 2))
    for value in goodput.goodput(rows)["share"].dropna():
        expect(body).to_contain_text(fmt.pct(value))
    if split != "dev":
        expect(body).to_contain_text("Not exported for test evaluations")
        return
    button = page.get_by_role("button", name="Download the per-request rows (Parquet)")
    expect(button).to_be_visible()
    with page.expect_download(timeout=90_000) as download:
        button.click()
    table = pq.read_table(io.BytesIO(Path(download.value.path()).read_bytes()))
    assert download.value.suggested_filename == f"{evaluation_id}-requests.parquet"
    assert table.num_rows == int(rows.requests["requests"].sum()) and "chunk_times" in table.column_names


def _expect_curves(page, home: Path, board) -> None:
    """Every reference's and the leader's per-user speed, as board/curves.py computes them."""
    from speculator_arena.board import curves, shown

    refs = board[board["section"] == "references"].index.tolist()
    leader = board[(board["section"] == "participants") & board["ranked"].fillna(False).astype(bool)]
    ids = refs + leader.index[:1].tolist()
    body = page.locator("body")
    for value in curves.interactivity_points(shown.read_shown(home, ids))["per_user"].dropna():
        expect(body).to_contain_text(fmt.num(value, 2), timeout=90_000)


def _stage_wider_noise(tmp_path, monkeypatch) -> None:
    """A staged protocol version whose local-smollm2 task has a calibrated max A/A error of 0.25:
    alpha (1.39) and beta (1.05) then lie within each other's noise and share rank 1 (under the
    shipped calibration, 0.08, they are ranked apart: tests/dashboards/test_pages.py)."""
    from importlib import resources

    import yaml

    from speculator_arena.protocol import load_protocol

    latest = load_protocol().version
    doc = yaml.safe_load((resources.files("speculator_arena.protocol") / "versions" / f"v{latest}.yaml").read_text())
    doc["version"] = latest + 1
    doc["tasks"]["local-smollm2"]["speed_noise"] = {"mean_abs_error": 0.1, "max_abs_error": 0.25}
    (tmp_path / f"v{latest + 1}.yaml").write_text(yaml.safe_dump(doc))
    monkeypatch.setenv("ARENA_PROTOCOL_DIR", str(tmp_path))  # the served board and the expected scores


def test_browser_shows_the_synthetic_warehouse(browser, synthetic_home, tmp_path, monkeypatch):
    """Served under the staged wider noise (`_stage_wider_noise`): alpha and beta share rank 1."""
    _stage_wider_noise(tmp_path, monkeypatch)
    _check_served_board(browser, synthetic_home, "ev-alpha", "synthetic", shared=("alpha", "beta"))


# Every element of the page that could scroll sideways: the document, Streamlit's main block, and
# every table with each of its ancestors. [what, scrollWidth, clientWidth] for each that overflows.
OVERFLOWING = """() => {
  const out = [];
  const check = (what, el) => {
    if (el && el.scrollWidth > el.clientWidth) out.push([what, el.scrollWidth, el.clientWidth]);
  };
  check("document", document.scrollingElement);
  check("main", document.querySelector("[data-testid='stMain']"));
  document.querySelectorAll("table").forEach((table, i) => {
    for (let el = table; el && el !== document.body; el = el.parentElement) {
      check(`table ${i} ${el.tagName.toLowerCase()}.${el.getAttribute("data-testid") || el.className}`, el);
    }
  });
  return out;
}"""


def test_board_first_page_leads_with_a_picture_and_fits_1400px(browser, synthetic_home, tmp_path, monkeypatch):
    """The first page at 1400 x 1000: the interval plot drawn (a vega-embed canvas or svg of nonzero
    size, before the tables), no horizontal scroll bar on the page or on any table's container, and
    the top entry's rank and SpecScore [interval] visible in the table, within the viewport's width.
    Its screenshot is the one docs/viewers/board.md shows (docs/board/board.png)."""
    from speculator_arena.board.ranking import board_rows
    from speculator_arena.dashboards.board_table import score_cell

    _stage_wider_noise(tmp_path, monkeypatch)
    scores = scores_of_whole_warehouse(synthetic_home)
    board = board_rows(scores, "local-smollm2", "dev")
    top = board[board["section"] == "participants"].iloc[0]
    rank, score = fmt.rank(top["rank"], top["tie"]), score_cell(top)
    assert (top["label"], rank) == ("alpha", "1=")  # sharing rank 1 with beta under the staged noise
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    served = Served(synthetic_home)
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{served.url}/?task=local-smollm2&split=dev")
        page.get_by_role("link", name="alpha", exact=True).first.wait_for(timeout=90_000)
        charts = page.locator("[data-testid='stVegaLiteChart']")
        expect(charts.first).to_be_visible(timeout=90_000)
        drawn = charts.first.locator("canvas, svg").first
        drawn.wait_for(timeout=90_000)
        box = drawn.bounding_box()
        assert box is not None and box["width"] > 100 and box["height"] > 20, box
        assert charts.count() == 2  # participants, then references
        # the picture comes first: above the participants' table
        table_box = page.locator("table").first.bounding_box()
        assert box["y"] + box["height"] <= table_box["y"]
        page.wait_for_timeout(1500)  # let the charts draw before the screenshot
        assert page.evaluate(OVERFLOWING) == []
        cells = _row_cells(page, "alpha")
        assert cells[0] == rank and cells[3] == score
        row = page.locator("table tr").filter(has=page.get_by_role("link", name="alpha", exact=True)).first
        for text in (rank, score):
            cell = row.locator("td").filter(has_text=text).first
            expect(cell).to_be_visible()
            cell_box = cell.bounding_box()
            assert cell_box["x"] >= 0 and cell_box["x"] + cell_box["width"] <= 1400, (text, cell_box)
        page.screenshot(path=str(ARTIFACTS / "synthetic-board-1400.png"))
        page.close()
    finally:
        served.stop()
    assert (ARTIFACTS / "synthetic-board-1400.png").stat().st_size > 10_000


@pytest.mark.slow
def test_browser_shows_a_real_local_evaluation(browser, real_home):
    scores = scores_of_whole_warehouse(real_home)
    eid = scores.evaluations["evaluation_id"].iloc[-1]
    _check_served_board(browser, real_home, eid, "real")


def test_browser_shows_the_lowbarena_board(browser, lowb_demo, monkeypatch):
    """LowBArena's page: its board of the demo's references, the lossy one's reason, and an
    evaluation's axes with the figures under them."""
    monkeypatch.setenv("ARENA_PROTOCOL_DIR", str(lowb_demo.protocol_dir))
    served = Served(lowb_demo.home)
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 1800})
        page.goto(f"{served.url}/lowbarena")
        expect(page.get_by_text("Quantizations of a task's model", exact=False)).to_be_visible(timeout=60_000)
        expect(page.get_by_text("T · TPS", exact=False)).to_be_visible(timeout=60_000)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "lowbarena.png"), full_page=True)
        text = page.inner_text("body")
        # the board's rows are a canvas grid; the evaluation's section below it is text
        assert "bf16: LowBScore" in text and "A · Accuracy kept" in text and "P · Profit" in text
        assert "Gates" in text
    finally:
        served.stop()
