"""The arena's front door (protocol sections 2, 3 and 8): accounts and tokens, quotas, intake,
sealing, the HTTP API (`arena api`), the queue that runs accepted submissions, and the kit's
client (`arena submit`).

Operational state (accounts, token hashes, submissions, settings) lives in SQLite under
`$ARENA_HOME/frontdoor/state.db` (see `state.py`); what an evaluation measured lives in the
warehouse, and quota use is derived from both (see `quotas.py`).
"""
