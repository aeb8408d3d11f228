"""LowBArena: one board per task (quantizations ranked by LowBScore beside BF16), and each
evaluation's page with how its score was computed from its own numbers (the rules' worked
example is the model for it), then the rules' own worked example recomputed by the same code.

Everything is read through board/lowb.py and scoring/lowb (the same rows as `GET /api/board` and
`arena demo --task lowb-smollm2`); this page only lays them out.
"""

import math

import pandas as pd
import streamlit as st

from speculator_arena.board.lowb import JSON_COLUMNS, lowb_board_rows
from speculator_arena.dashboards import cached
from speculator_arena.protocol.lowb import load_lowb_protocol


@st.cache_data(ttl=cached.TTL, show_spinner=False)
def _scored(home: str):
    from speculator_arena.scoring.lowb import score_lowb
    from speculator_arena.warehouse import Warehouse

    wh = Warehouse(home)
    scores = score_lowb(wh)
    created = wh.read_table("evaluations").to_pandas()
    return scores.evaluations, scores.gates, scores.domains, created


def _num(x, digits=3) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def evaluation_section(row: pd.Series, gates: pd.DataFrame, domains: pd.DataFrame) -> None:
    """How one evaluation's LowBScore was computed, with its own numbers."""
    st.subheader(f"{row['label']}: LowBScore {_num(row['lowbscore'], 4)}")
    st.caption(f"evaluation `{row['evaluation_id']}`; {row['reason'] or 'every gate passed'}")
    st.table(
        pd.DataFrame(
            [
                {
                    "axis": "T · TPS",
                    "measured against BF16": f"serve {_num(row['s_serve'])}× · interactive {_num(row['s_interactive'])}× "
                    f"· long context {_num(row['s_long'])}×; geometric mean {_num(row['speed_gmean'])}; "
                    f"generated length {_num(100 * row['delta_l'], 1)}%",
                    "value": _num(row["T"]),
                },
                {
                    "axis": "P · Profit",
                    "measured against BF16": f"serve {_num(row['c_serve'], 1)} vs {_num(row['c_serve_bf16'], 1)} · "
                    f"long context {_num(row['c_long'], 1)} vs {_num(row['c_long_bf16'], 1)} requests at once",
                    "value": _num(row["P"]),
                },
                {
                    "axis": "A · Accuracy kept",
                    "measured against BF16": f"drop {_num(row['drop'], 2)} points, KL {_num(row['kl'], 4)}; "
                    f"D = {_num(row['D'], 2)}",
                    "value": _num(row["A"]),
                },
                {
                    "axis": "g",
                    "measured against BF16": row["reason"] or "every gate passed",
                    "value": _num(row["g"], 1),
                },
                {
                    "axis": "LowBScore",
                    "measured against BF16": f"{_num(row['g'], 1)} × {_num(row['T'])}⅓ × {_num(row['P'])}⅓ × "
                    f"{_num(row['A'])}⅓",
                    "value": _num(row["lowbscore"]),
                },
            ]
        ),
        hide_index=True,
    )
    st.markdown("**Gates** (each against BF16 in the same run)")
    st.dataframe(gates[gates["evaluation_id"] == row["evaluation_id"]].drop(columns=["evaluation_id"]), hide_index=True)
    st.markdown("**Accuracy by domain**")
    st.dataframe(
        domains[domains["evaluation_id"] == row["evaluation_id"]].drop(columns=["evaluation_id"]), hide_index=True
    )
    st.caption(
        f"Shown, not scored: perplexity against BF16 {_num(row['perplexity_ratio'], 4)}×; "
        f"W·A·KV {row.get('w_a_kv', '?')}; device-hours {_num(row.get('device_hours'), 4)}."
    )


def main() -> None:
    st.title("LowBArena")
    st.markdown(
        "Quantizations of a task's model, each measured beside BF16 on the same machine with the same "
        "requests: **LowBScore = g · T⅓ · P⅓ · A⅓** (BF16 scores 1; higher is better)."
    )
    proto = load_lowb_protocol()
    tasks = list(proto.tasks)
    c1, c2 = st.columns(2)
    task = c1.selectbox("Task", tasks, index=tasks.index("lowb-smollm2") if "lowb-smollm2" in tasks else 0)
    split = c2.selectbox("Split", ["dev", "test"], index=0)
    evaluations, gates, domains, created = _scored(cached.home())
    rows = lowb_board_rows(evaluations, created, task, split)
    if rows.empty:
        st.info(f"No measured LowBArena evaluation of {task} on the {split} split yet (`arena demo --task {task}`).")
    else:
        for section in ("participants", "references"):
            part = rows[rows["section"] == section]
            st.markdown(f"**{section.capitalize()}**" + (" (ranked apart)" if section == "references" else ""))
            if part.empty:
                st.caption("none")
                continue
            shown = [c for c in JSON_COLUMNS if c in part.columns and c not in ("section", "account_id")]
            st.dataframe(part[shown], hide_index=True)
        labels = {f"{r.label} ({r.evaluation_id})": r.evaluation_id for r in rows.itertuples()}
        picked = st.selectbox("Evaluation", list(labels))
        evaluation_section(rows[rows["evaluation_id"] == labels[picked]].iloc[0], gates, domains)
    with st.expander("The rules' worked example, recomputed by the scorer's own functions"):
        from speculator_arena.scoring.lowb import worked_example

        st.json(worked_example())


main()
