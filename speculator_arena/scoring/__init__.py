"""Scoring: speeds, ratios, gates and SpecScore recomputed from raw rows under a protocol version."""

from speculator_arena.scoring.board import board_rows, board_text
from speculator_arena.scoring.score import Scores, score_warehouse

__all__ = ["Scores", "board_rows", "board_text", "score_warehouse"]
