"""LowBArena's scorer: LowBScore = g * T^(1/3) * P^(1/3) * A^(1/3) of each measured LowBArena
evaluation, from its raw rows (warehouse/schema.py LOWB_*) under a LowBArena protocol version.

A package of its own beside the speculator scorer (scoring/score.py), which it neither imports nor
changes: the two arenas share the warehouse, the SQL-file reader and the status rules, not formulas.
"""

from speculator_arena.scoring.lowb.example import worked_example
from speculator_arena.scoring.lowb.kl import kl_topk
from speculator_arena.scoring.lowb.score import LowbScores, score_lowb

__all__ = ["LowbScores", "kl_topk", "score_lowb", "worked_example"]
