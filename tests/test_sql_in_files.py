"""No SQL in the product's Python: every statement is a `.sql` file (docs/contributors/contracts.md), read
through sqlfiles.py. A string literal of the package that starts like a SQL statement fails."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "speculator_arena"
STATEMENT = re.compile(
    r"^\s*(SELECT|WITH|CREATE|INSERT|UPDATE|DELETE|DROP|ALTER|SET|PRAGMA|CHECKPOINT|COPY|ATTACH|BEGIN)\b[\s(]",
)
# Literals that are not statements: the one rewrite of the view files' own prefix (store.py,
# temporary views), and SQLite's transaction verbs, which Python's sqlite3 takes as calls.
NOT_STATEMENTS = {"CREATE OR REPLACE VIEW", "CREATE OR REPLACE TEMPORARY VIEW", "BEGIN IMMEDIATE"}


def sql_literals(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        if text.strip() not in NOT_STATEMENTS and STATEMENT.match(text + " "):
            out.append((node.lineno, text.strip()[:60]))
    return sorted(dict(sorted(out, reverse=True)).items())  # one per line: an f-string's pieces are visited too


def test_no_statement_is_spelled_in_python():
    found = {
        f"{p.relative_to(PACKAGE.parent)}:{line}": text
        for p in sorted(PACKAGE.rglob("*.py"))
        for line, text in sql_literals(p)
    }
    assert found == {}, "SQL belongs in .sql files: " + "; ".join(f"{k} {v!r}" for k, v in found.items())


def test_the_scan_sees_a_statement(tmp_path):
    """Not vacuous: a statement in a literal, plain or formatted, is found."""
    p = tmp_path / "m.py"
    p.write_text('x = "SELECT 1"\ny = f"CREATE TABLE raw_{t} AS {s}"\nz = "select the rows"\n')
    assert [line for line, _ in sql_literals(p)] == [1, 2]
