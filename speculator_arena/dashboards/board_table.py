"""The ranked table of the board, as Markdown rows (numbers stay in the page's text, unlike
`st.dataframe`, which draws on a canvas; the browser test reads them). The rank is the shared
one of board/ranking.py (`2=`: another entry's interval overlaps), beside each SpecScore its
95% interval (scoring/intervals.py)."""

from __future__ import annotations

import pandas as pd

from speculator_arena.dashboards import formatting as fmt
from speculator_arena.dashboards.links import evaluation_md

COLUMNS = [
    "#",
    "Participant",
    "Account",
    "SpecScore",
    "Interval low",
    "Interval high",
    "r solo",
    "r team",
    "r busy",
    "Gates",
    "TTFT p50 / p90 / p99 (ms)",
    "TPOT p50 / p90 / p99 (ms)",
    "Cache hit (tokens / per request)",
    "Acceptance (mean length / draft rate)",
    "Dev/test gap",
    "Note",
]


def gates_cell(row) -> str:
    failed = fmt.text(row.get("failed_gates"))
    not_measured = fmt.text(row.get("not_measured_gates"))
    passed = row.get("gates_pass")
    if failed:
        return "fail: " + fmt.md_escape(failed.replace(",", ", "))
    if not fmt.missing(passed) and bool(passed):
        return "pass" + (f" (not measured: {fmt.md_escape(not_measured.replace(',', ', '))})" if not_measured else "")
    if not_measured:
        return "not measured: " + fmt.md_escape(not_measured.replace(",", ", "))
    return fmt.BLANK


def _triple(row, engine: str, figure: str) -> str:
    return " / ".join(fmt.ms(row.get(f"{engine}_{figure}_{p}")) for p in ("p50", "p90", "p99"))


def row_cells(row: dict, protocol_version: int | None, label_column: str = "Participant") -> dict[str, str]:
    return {
        "#": fmt.rank(row.get("rank"), row.get("tie")),
        label_column: evaluation_md(fmt.text(row.get("label")), str(row["evaluation_id"]), protocol_version),
        "Account": fmt.md_escape(row.get("account_id")),
        "SpecScore": fmt.score(row.get("specscore")),
        "Interval low": fmt.ratio(row.get("interval_low")),
        "Interval high": fmt.ratio(row.get("interval_high")),
        "r solo": fmt.ratio(row.get("r_solo")),
        "r team": fmt.ratio(row.get("r_team")),
        "r busy": fmt.ratio(row.get("r_busy")),
        "Gates": gates_cell(row),
        "TTFT p50 / p90 / p99 (ms)": _triple(row, "candidate", "ttft"),
        "TPOT p50 / p90 / p99 (ms)": _triple(row, "candidate", "tpot"),
        "Cache hit (tokens / per request)": f"{fmt.pct(row.get('candidate_cache_hit_tokens'))} / "
        f"{fmt.pct(row.get('candidate_cache_hit_mean'))}",
        "Acceptance (mean length / draft rate)": f"{fmt.num(row.get('candidate_mean_acceptance_length'), 2)} / "
        f"{fmt.pct(row.get('candidate_draft_acceptance_rate'))}",
        "Dev/test gap": fmt.flag(row.get("gap_flag")),
        "Note": fmt.md_escape(row.get("specscore_reason")),
    }


def markdown(rows: pd.DataFrame, protocol_version: int | None, label_column: str = "Participant") -> str:
    cols = [label_column if c == "Participant" else c for c in COLUMNS]
    cells = [row_cells(r, protocol_version, label_column) for r in rows.to_dict("records")]
    return fmt.md_table(cells, cols)


def intervals_caption(noise: dict) -> str:
    """What the interval columns are, and the noise they are widened by (board/ranking.py `board_noise`)."""
    widened = (
        f"widened on each side by the task's calibrated max A/A error {noise['max_abs_error']:.3f} "
        "(low × (1 − e), high × (1 + e))"
        if noise["calibrated"]
        else "not widened: the max A/A error is not calibrated for this task"
    )
    return (
        "Interval low / high: a seeded bootstrap 95% interval of the SpecScore (1,000 resamples of its passes "
        f"within each workload), {widened}. Rank = 1 + the number of entries whose interval lies entirely "
        "above this one's, so entries within each other's noise share a rank, written 2=."
    )


def show_aa_check(st, noise: dict) -> None:
    """Beside the references: the A/A reference against the calibrated noise, flagged when outside."""
    text = "A/A check: " + fmt.md_escape(noise["note"])
    if noise["aa_flag"]:
        st.warning(text)
    else:
        st.caption(text)
