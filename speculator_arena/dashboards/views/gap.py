"""The dev/test gap (protocol section 8): each account's last scored test SpecScore against its
last scored dev one; flagged when test < (1 − gap) × dev."""

import streamlit as st

from speculator_arena.dashboards import cached
from speculator_arena.dashboards import formatting as fmt
from speculator_arena.dashboards.links import evaluation_md
from speculator_arena.protocol import load_protocol


def main() -> None:
    sel = st.session_state["selection"]
    st.title(f"Dev/test gap: {sel.task_id or 'no task'}")
    proto = load_protocol(sel.protocol_version)
    # the task's own gap where a calibration set one (section 10: 5 x its worst A/A error)
    gap = proto.task(sel.task_id).dev_test_gap if sel.task_id in proto.tasks else proto.dev_test_gap
    st.caption(
        f"A submission is flagged when its last scored test SpecScore is below (1 − {gap}) × its last "
        f"scored dev SpecScore (protocol v{sel.protocol_version}, gap {gap}). A speculator that memorized "
        "the public pool gains more on dev than on the hidden test pool."
    )
    frames = cached.board_or_notice(sel)
    if frames is None:
        return
    ev = frames.evaluations
    if ev.empty:
        st.info(f"No finished evaluation of {sel.task_id} yet.")
        return
    ev = ev[(ev["task_id"] == sel.task_id) & ev["specscore"].notna() & ~ev["is_reference"].fillna(False).astype(bool)]
    rows = []
    for acct, grp in ev.groupby("account_id"):
        dev = grp[grp["split"] == "dev"].sort_values(["created_at", "evaluation_id"])
        test = grp[grp["split"] == "test"].sort_values(["created_at", "evaluation_id"])
        d = dev.iloc[-1] if len(dev) else None
        t = test.iloc[-1] if len(test) else None
        flag = grp["gap_flag"].dropna()
        rows.append(
            {
                "Account": fmt.md_escape(acct),
                "Last dev": evaluation_md(d["label"], d["evaluation_id"], sel.protocol_version)
                if d is not None
                else fmt.BLANK,
                "dev SpecScore": fmt.score(d["specscore"]) if d is not None else fmt.BLANK,
                "Last test": evaluation_md(t["label"], t["evaluation_id"], sel.protocol_version)
                if t is not None
                else fmt.BLANK,
                "test SpecScore": fmt.score(t["specscore"]) if t is not None else fmt.BLANK,
                "flag below": fmt.score((1 - gap) * d["specscore"]) if d is not None else fmt.BLANK,
                "Gap": fmt.flag(flag.iloc[0])
                if len(flag)
                else ("needs both splits" if d is None or t is None else fmt.BLANK),
                "_order": (0 if len(flag) and bool(flag.iloc[0]) else 1, str(acct)),
            }
        )
    if not rows:
        st.info(f"No account has a scored evaluation of {sel.task_id} yet.")
        return
    rows.sort(key=lambda r: r["_order"])
    flagged = sum(1 for r in rows if r["Gap"] == "FLAGGED")
    st.metric("Accounts flagged", f"{flagged} of {len(rows)}")
    cols = ["Account", "Last dev", "dev SpecScore", "Last test", "test SpecScore", "flag below", "Gap"]
    st.markdown(fmt.md_table(rows, cols))


main()
