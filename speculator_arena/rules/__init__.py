"""The protocol's rules as functions: the one home of every rule a caller applies.

Beside the protocol's values (`speculator_arena.protocol`), which say *how much*, this package
says *what counts*: an evaluation's status vocabulary and its current row (status.py), a counted
request (counted.py), an unanswered probe check (answering.py), a contended pass (contention.py),
the idle engine of the interleaved pairing (idle.py), the device-memory budget (memory.py), the
window fit (window.py), the live sessions a workload keeps (slots.py) and the arena's own
accounts (accounts.py). Pure functions over numbers and rows: no I/O, no Dagster, no engine. The
runner, the pools, the scorer, the board and the front door all import them from here, so a rule
is changed in one place and every caller follows (docs/contributors/architecture.md, "One home per rule").
"""
