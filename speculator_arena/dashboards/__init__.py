"""The board's Streamlit pages, computed from the warehouse's raw rows (protocol sections 5 and 8).

`arena board` serves `app.py`. What the pages read is `speculator_arena.board` (the read model,
without Streamlit, shared with `GET /api/board` and `arena board --text`); this package holds
only the pages, their sidebar, charts and Markdown tables, and `cached.py` (Streamlit's caches
around the read model).
"""
