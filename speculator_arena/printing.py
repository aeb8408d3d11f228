"""What every command that prints JSON prints with (a module below the CLI, so that the
commands of every domain can use it without importing the CLI above them)."""

from __future__ import annotations

import json
import math
import sys


def print_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=2, sort_keys=False, default=str)
    sys.stdout.write("\n")


def json_cell(v):
    """A frame's cell as plain JSON: NaN, NA and NaT as null, numpy scalars as Python ones (what
    `arena score --json` and `GET /api/board` print for each row)."""
    if v is None or str(v) in ("<NA>", "NaT"):
        return None
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v
