"""The arena's own accounts: who an evaluation that no participant submitted belongs to.

`arena`: the task's reference speculators (protocol section 11), evaluated by `arena demo` and
the operators, shown on the board as references. `arena-calibration`: a calibration's runs
(section 10), never ranked: they are evidence for the limits, not entries.
"""

from __future__ import annotations

REFERENCES_ACCOUNT = "arena"
CALIBRATION_ACCOUNT = "arena-calibration"
