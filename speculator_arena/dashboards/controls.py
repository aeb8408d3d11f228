"""The sidebar shared by every page: which task, which split, scored under which protocol version.

They live in the entry script (app.py), so the choice follows the viewer from page to page;
`?task=`, `?split=` and `?protocol=` in the address seed them, so a link opens the same view.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from speculator_arena.board import data
from speculator_arena.dashboards import cached
from speculator_arena.protocol import available_versions, load_protocol


@dataclass(frozen=True)
class Selection:
    home: str
    task_id: str | None
    split: str
    protocol_version: int
    state: data.WarehouseState


def _seed_from_query(key: str, options: list, convert=str) -> None:
    if key in st.session_state:
        return
    raw = st.query_params.get(key)
    if raw is None:
        return
    try:
        value = convert(raw)
    except (TypeError, ValueError):
        return
    if value in options:
        st.session_state[key] = value


def _seed_task_from_evaluation(home: str, state: data.WarehouseState, tasks: list[str]) -> None:
    """A link to `?evaluation=<id>` opens with the sidebar on that evaluation's task."""
    eid = st.query_params.get("evaluation")
    if "task" in st.session_state or eid is None or not state.evaluations or "task" in st.query_params:
        return
    idx = cached.index(home)
    hit = idx.loc[idx["evaluation_id"] == eid, "task_id"]
    if len(hit) and hit.iloc[0] in tasks:
        st.session_state["task"] = hit.iloc[0]


def task_options(state: data.WarehouseState) -> list[str]:
    """Tasks with evaluations first (newest activity first), then the protocol's public tasks,
    then its development tasks (the embedded `local-smollm2`)."""
    present = list(state.tasks)
    proto = load_protocol()
    listed = proto.public_tasks() + [t for t in proto.tasks if t not in proto.public_tasks()]
    return present + [t for t in listed if t not in present]


def sidebar() -> Selection:
    home = cached.home()
    state = cached.state(home)
    versions = available_versions()
    tasks = task_options(state)
    with st.sidebar:
        _seed_task_from_evaluation(home, state, tasks)
        _seed_from_query("task", tasks)
        _seed_from_query("split", list(data.SPLITS))
        _seed_from_query("protocol", versions, int)
        if st.session_state.get("protocol") not in versions:
            st.session_state["protocol"] = versions[-1]
        if tasks and st.session_state.get("task") not in tasks:
            st.session_state["task"] = tasks[0]
        if st.session_state.get("split") not in data.SPLITS:
            st.session_state["split"] = data.SPLITS[0]
        task_id = st.selectbox("Task", tasks, key="task") if tasks else None
        split = st.radio(
            "Split",
            list(data.SPLITS),
            key="split",
            horizontal=True,
            help="dev: the public pool; test: the hidden pool (protocol section 8)",
        )
        version = st.selectbox(
            "Scored under protocol",
            versions,
            key="protocol",
            format_func=lambda v: f"v{v}",
            help="Scores are recomputed from raw rows under the version chosen here.",
        )
        st.caption(f"Warehouse: `{state.home}` (read-only)")
        if st.button("Refresh", help=f"Cached reads expire after {cached.TTL:.0f} s; this reads again now."):
            cached.clear()
            st.rerun()
    return Selection(home, task_id, split, int(version), state)
