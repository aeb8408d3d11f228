"""The base of every section's model: unknown keys refused, values frozen.

Why a model and not a dict: a typo in a limit's name must fail at load time, not silently
score every evaluation with a default; and a version is immutable, so is what it loads into.
Apart so that every section's module (serving.py, gates.py, model.py) derives from one base.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
