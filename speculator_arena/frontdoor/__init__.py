"""The arena's front door (protocol sections 2, 3 and 8): accounts and tokens, quotas, intake,
sealing, the HTTP API (`arena api`), the queue that runs accepted submissions, and the kit's
client (`arena submit`).

Every byte of a submission is treated as hostile: it is extracted, fetched and sealed in a
sandboxed child (`sandbox.py`, `worker.py`) by an extractor that cannot follow a link
(`archive.py`), network fetches leave the request (`fetcher.py`), repository URLs naming an
internal address are refused in it (`urls.py`), every route's input is bounded (`bounded.py`),
and failed authentications are limited per client address (`authlimit.py`).

Operational state (accounts, token hashes, submissions, settings) lives in SQLite under
`$ARENA_HOME/frontdoor/state.db` (see `state.py`); what an evaluation measured lives in the
warehouse, and quota use is derived from both (see `quotas.py`).
"""
