"""SQL lives in files beside the module that owns it; this reads them, for every owner.

- `warehouse/sql/`: the warehouse's views (numbered, defined in name order in every connection:
  the operators', the scorer's and the analysts' database), from `staged_requests` (what counts)
  to `pass_speeds`;
- `warehouse/sql/macros/`: macros every connection defines before those views (the names of
  the engine's speculative-decoding counters, the position label of a per-position counter);
- `warehouse/sql/analysts/`: views defined for people reading the warehouse, in the operators'
  connection and the analysts' database (docs/warehouse.md lists them), never read by code;
- `warehouse/sql/copied/`: the analysts' database's copy rules that are more than "all" or "dev";
- `scoring/sql/`: the scorer's queries, with parameters (`$ids`);
- `warehouse/sql/templates/`: statements whose identifiers or paths are the arena's own (a
  schema's column list, a file under ARENA_HOME) and are formatted in (`template`);
- `board/sql/`: the board's queries; `frontdoor/sql/`: the front door's SQLite state.

No statement is written in Python (tests/test_sql_in_files.py).
"""

from __future__ import annotations

from functools import cache
from importlib import resources


@cache
def read(package: str, name: str, folder: str = "sql") -> str:
    """One file: `read("speculator_arena.scoring", "gate_length.sql")`."""
    return (resources.files(package) / folder / name).read_text(encoding="utf-8")


def numbered(package: str, folder: str = "sql") -> list[str]:
    """Every numbered file (`10_*.sql`, ...) of one folder, in name order: views, one per file."""
    root = resources.files(package) / folder
    if not root.is_dir():
        return []
    return [
        f.read_text(encoding="utf-8")
        for f in sorted(root.iterdir(), key=lambda f: f.name)
        if f.name.endswith(".sql") and f.name[:2].isdigit()
    ]


def template(package: str, name: str, **parts: str) -> str:
    """A statement of `<package>/sql/templates/` with `parts` formatted in. Why formatting at all:
    DuckDB takes no parameters for identifiers and file lists; every part given here is built by
    the caller from the arena's own schema or paths (quoted there), never from outside input, and
    values are always bound as parameters."""
    return read(package, name, "sql/templates").format(**parts)
