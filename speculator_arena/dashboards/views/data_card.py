"""The public data card of a task's pools (sources, licenses, statistics). Only the card is
read: never the hidden test pool, and no pool text."""

import streamlit as st

from speculator_arena.pools.builder.datacard import card_locations, load_data_card


def main() -> None:
    sel = st.session_state["selection"]
    st.title(f"Data card: {sel.task_id or 'no task'}")
    if sel.task_id is None:
        st.info("Choose a task in the sidebar.")
        return
    card = load_data_card(sel.task_id, sel.home)
    if card is None:
        where = ", ".join(f"`{p}.md`" for p in card_locations(sel.task_id, sel.home))
        st.info(
            f"No data card has been built for {sel.task_id} yet (looked for {where}). "
            "Building the task's pools writes it."
        )
        return
    st.caption(f"From `{card.source}`")
    if card.markdown:
        st.markdown(card.markdown)
    if card.plot is not None:
        st.image(str(card.plot), caption="Session structure of the public pool against its sources")
    if card.stats is not None:
        with st.expander("Statistics (JSON)", expanded=card.markdown is None):
            st.json(card.stats)


main()
