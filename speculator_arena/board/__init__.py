"""The board's read model: what every board surface reads, without Streamlit.

The Streamlit board (`dashboards/`, which keeps only its pages and Streamlit's caches around
this package), the HTTP API's `GET /api/board` (`json_rows.py`) and the text board
(`arena board --text`, `arena demo`: `text.py`) all read the same rows:

- `data.py`: what the board reads from the warehouse (the evaluations index, scoped scoring,
  an evaluation's raw measurements), read-only;
- `memo.py`: the in-process memo that re-scores only evaluations whose files changed;
- `ranking.py`: the one ranking (`board_rows`: shared ranks within the intervals, the A/A check);
- `text.py`, `json_rows.py`: the terminal's text and the API's JSON of those rows;
- `protocol_diff.py`: what changed between two protocol versions.

Nothing here imports Streamlit (tests/board/test_no_streamlit.py), so the API's path never
loads it. This `__init__` imports nothing, so reading the board never imports the scorer
before it scores.
"""
