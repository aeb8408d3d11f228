"""Scoring: speeds, ratios, gates and SpecScore recomputed from raw rows under a protocol version.

The board's ranking of these scores is `speculator_arena.board` (board/ranking.py), above this
package; the SpecScore's interval, a statistic of the scores, stays here (intervals.py)."""

from speculator_arena.scoring.score import Scores, score_warehouse

__all__ = ["Scores", "score_warehouse"]
