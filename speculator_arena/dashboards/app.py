"""The board's one entry point: `streamlit run speculator_arena/dashboards/app.py` (or `arena board`).

It reads `ARENA_HOME` read-only; every page is computed from the warehouse's raw rows through
the scorer (protocol sections 5 and 8, SCORING.md).
"""

from pathlib import Path

import streamlit as st

from speculator_arena.dashboards import controls

HERE = Path(__file__).resolve().parent

st.set_page_config(page_title="SpeculatorArena", page_icon="⏩", layout="wide")

PAGES = [
    st.Page(HERE / "views" / "board.py", title="Board", url_path="board", default=True),
    st.Page(HERE / "views" / "evaluation.py", title="Evaluation", url_path="evaluation"),
    st.Page(HERE / "views" / "task.py", title="Task", url_path="task"),
    st.Page(HERE / "views" / "references.py", title="References", url_path="references"),
    st.Page(HERE / "views" / "sweep.py", title="Sweep", url_path="sweep"),
    st.Page(HERE / "views" / "gap.py", title="Dev/test gap", url_path="gap"),
    st.Page(HERE / "views" / "protocol.py", title="Protocol", url_path="protocol"),
    st.Page(HERE / "views" / "data_card.py", title="Data card", url_path="data-card"),
    st.Page(HERE / "views" / "methodology.py", title="Methodology", url_path="methodology"),
    st.Page(HERE / "views" / "submit.py", title="Submit", url_path="submit"),
    st.Page(HERE / "views" / "lowbarena.py", title="LowBArena", url_path="lowbarena"),
]

page = st.navigation(PAGES)
selection = controls.sidebar()
st.session_state["selection"] = selection
page.run()
