"""The board: Streamlit pages computed from the warehouse's raw rows (protocol sections 5 and 8).

`arena board` serves `app.py`; `arena board --text` prints the same ranking without Streamlit.
"""
