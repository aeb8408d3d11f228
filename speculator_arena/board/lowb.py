"""LowBArena's board: one per task, ranked by LowBScore (the rules' "Ranking").

- Participants rank by the LowBScore of their last scored submission (on the dev board: their
  last development evaluation, shown, never ranked against the test board).
- Those that pass every gate rank above those that miss one; equal scores share a rank.
- References (BF16 and the standard recipes, served by the stock engine) are ranked apart, under
  the same gates.
- The first missed gate is the reason shown; a contract or engine-rule miss scores 0.
- Device-hours are shown, not charged: the served seconds of the participant's own engine over
  all its evaluations of the task (development and scored; start-ups, BF16's runs and
  evaluations void because of the arena are not counted: only measured or failed ones are).

The rows come from the LowBArena scorer's frames (scoring/lowb); nothing here recomputes a score.
"""

from __future__ import annotations

import math

import pandas as pd

from speculator_arena.scoring.lowb.score import FIGURE_COLUMNS

SHOWN = ["rank", "label", "lowbscore", "T", "P", "A", "g", "reason", "w_a_kv", "perplexity_ratio", "device_hours"]


def _rank(frame: pd.DataFrame) -> pd.Series:
    """Competition ranks: every entry passing the gates before every one that misses one, then by
    score; equal (group, score) share the rank of the first of them."""
    key = list(zip(~frame["passes"], -frame["lowbscore"].fillna(-math.inf)))
    order = sorted(range(len(key)), key=lambda i: key[i])
    ranks = [0] * len(key)
    for pos, i in enumerate(order):
        prev = order[pos - 1] if pos else None
        ranks[i] = ranks[prev] if prev is not None and key[prev] == key[i] else pos + 1
    return pd.Series(ranks, index=frame.index)


def lowb_board_rows(evaluations: pd.DataFrame, created: pd.DataFrame, task_id: str, split: str) -> pd.DataFrame:
    """The ranked rows of one task's board. `evaluations`: the scorer's frame; `created`: each
    evaluation's `created_at` (the raw evaluations rows), which decides a participant's last one."""
    ev = evaluations[(evaluations["task_id"] == task_id) & (evaluations["split"] == split)].copy()
    if ev.empty:
        return ev.assign(section=[], rank=[], tie=[], passes=[], device_hours=[])
    ev = ev.merge(created[["evaluation_id", "created_at"]], on="evaluation_id", how="left")
    ev["reason"] = [r if isinstance(r, str) else "" for r in ev["reason"]]  # "" when every gate passed
    ev["passes"] = ev["reason"] == ""
    ev["w_a_kv"] = [
        "·".join(str(x) if isinstance(x, str) and x else "?" for x in (w, a, kv))
        for w, a, kv in zip(ev["declared_weights"], ev["declared_activations"], ev["declared_kv"])
    ]
    served = ev.groupby("account_id", dropna=False)["device_seconds"].sum(min_count=1)
    ev["device_hours"] = [served.get(a, math.nan) / 3600.0 for a in ev["account_id"]]
    refs = ev[ev["is_reference"]]
    people = ev[~ev["is_reference"]].sort_values("created_at").groupby("account_id", dropna=False).tail(1)
    parts = []
    for section, frame in (("participants", people), ("references", refs)):
        if frame.empty:
            continue
        frame = frame.copy()
        frame["section"] = section
        frame["rank"] = _rank(frame)
        counts = frame["rank"].value_counts()
        frame["tie"] = [counts[r] > 1 for r in frame["rank"]]
        parts.append(frame.sort_values(["rank", "label"]))
    return pd.concat(parts, ignore_index=True)


def _fmt(x, digits=3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.{digits}f}"


def aa_check(rows: pd.DataFrame, noise) -> list[str]:
    """One line per BF16 A/A reference on the board: its LowBScore against the task's calibrated A/A
    noise (protocol data `aa_noise`; None: not calibrated), within it or not."""
    out = []
    aa = rows[(rows["section"] == "references") & (rows["solution_kind"] == "bf16")] if len(rows) else rows
    for r in aa.itertuples():
        if noise is None:
            out.append(f"A/A {r.label}: LowBScore {_fmt(r.lowbscore, 4)}; the task's A/A noise is not calibrated")
            continue
        inside = abs(r.lowbscore - 1) <= noise.max_abs_error
        out.append(
            f"A/A {r.label}: LowBScore {_fmt(r.lowbscore, 4)}, "
            + ("within" if inside else "OUTSIDE")
            + f" the calibrated A/A noise of ±{noise.max_abs_error:.3f} ({noise.runs} runs)"
        )
    return out


def lowb_board_text(rows: pd.DataFrame, task_id: str, split: str, domains_note: str = "", noise=None) -> str:
    """One task's board for the terminal, and the A/A check under it."""
    lines = [f"LowBArena board: {task_id} ({split})" + (f"; {domains_note}" if domains_note else "")]
    head = f"{'rank':>5}  {'entry':<22} {'LowBScore':>9} {'T':>7} {'P':>7} {'A':>7} {'g':>4}  {'W·A·KV':<16} reason"
    for section in ("participants", "references"):
        part = rows[rows["section"] == section] if len(rows) else rows
        lines.append(f"-- {section} --")
        if part.empty:
            lines.append("   (none)")
            continue
        lines.append(head)
        for r in part.itertuples():
            rank = f"{int(r.rank)}{'=' if r.tie else ''}"
            lines.append(
                f"{rank:>5}  {str(r.label)[:22]:<22} {_fmt(r.lowbscore, 4):>9} {_fmt(r.T):>7} {_fmt(r.P):>7} "
                f"{_fmt(r.A):>7} {_fmt(r.g, 1):>4}  {r.w_a_kv:<16} {r.reason or 'every gate passed'}"
            )
    return "\n".join(lines + aa_check(rows, noise))


def lowb_board_json(home, task_id: str, split: str) -> dict:
    """`GET /api/board?task=<a LowBArena task>`: the ranked rows with every figure under the score,
    scored now from the raw rows (a LowBArena board is small; the scorer's cost against a bare scan
    is docs/benchmarks/scoring.md's)."""
    from speculator_arena.scoring.lowb import score_lowb
    from speculator_arena.warehouse import Warehouse

    wh = Warehouse(home)
    scores = score_lowb(wh)
    created = wh.read_table("evaluations").to_pandas()
    rows = lowb_board_rows(scores.evaluations, created, task_id, split)
    keep = [c for c in JSON_COLUMNS if c in rows.columns]
    out = rows[keep].astype(object).where(rows[keep].notna(), None)
    return {
        "arena": "lowbarena",
        "task": task_id,
        "split": split,
        "protocol_version": scores.version,
        "rows": out.to_dict(orient="records"),
    }


JSON_COLUMNS = [
    "section",
    "rank",
    "tie",
    "label",
    "evaluation_id",
    "account_id",
    *FIGURE_COLUMNS,
    "w_a_kv",
    "device_hours",
]
