"""What every command that prints JSON prints with (a module below the CLI, so that the
commands of every domain can use it without importing the CLI above them)."""

from __future__ import annotations

import json
import sys


def print_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=2, sort_keys=False, default=str)
    sys.stdout.write("\n")
