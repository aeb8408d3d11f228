"""The seven gates (SCORING.md "Gates"), one module each, every one a function from the scorer's
rows (rows.ScoringRows) and the evaluation rows with their limits (columns.EvaluationRows) to
that gate's columns for every evaluation row (columns.gate_columns). The sampled likelihood and
the first-choice share share one module: they are computed from the same scored replies.

What a gate's verdict does to SpecScore is decided in outcome.py, not here.
"""

from __future__ import annotations

import numpy as np

from speculator_arena.scoring.gates import answering, fidelity, greedy, length, memory, replies
from speculator_arena.scoring.gates.columns import EvaluationRows
from speculator_arena.scoring.rows import ScoringRows


def evaluate(rows: ScoringRows, on: EvaluationRows, incomplete: np.ndarray) -> tuple[list[dict], np.ndarray]:
    """Every gate's columns, in result.GATES order, and per row the stock engine's void text of
    the answering gate (None where it answered). `incomplete`: each row's incomplete reason
    (None where complete): the length gate reads complete evaluations only."""
    answering_gate, stock_text = answering.gate(rows, on)
    blocks = [
        greedy.gate(rows, on),
        *replies.gates(rows, on),
        fidelity.gate(rows, on),
        length.gate(rows, on, incomplete),
        memory.gate(rows, on),
        answering_gate,
    ]
    return blocks, stock_text
