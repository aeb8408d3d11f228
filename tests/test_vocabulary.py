"""One vocabulary of statuses: an evaluation's and a submission's intake's are declared once, as
str-valued enums in rules/status.py, and product code names them from there.

The first tests read the package's source with `ast` and fail on any status word outside
`rules/` used as a status value (compared, written, returned), and on any tuple, list or set
literal that holds two or more status words: such a set is a rule about statuses (which are
final, which wait, which count) stated a second time. SQL files may keep their
literals (a statement cannot import a Python name). The others pin why the members can replace
the literals without changing anything: a member is the very string that is stored and sent.
"""

from __future__ import annotations

import ast
import json
import sqlite3
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from speculator_arena.rules import status as S

PACKAGE = Path(__file__).resolve().parents[1] / "speculator_arena"
MEMBERS = [*S.Status, *S.IntakeState]
WORDS = {m.value for m in MEMBERS}


def status_sets(path: Path) -> list[tuple[int, list[str]]]:
    """(line, words) of every tuple, list or set literal of the file holding two status words or more."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            literals = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            words = [w for w in literals if w in WORDS]
            if len(words) >= 2:
                found.append((node.lineno, words))
    return found


# calls whose string argument is a key, not a value (`row.get("void")`: the scorer's void flag)
KEY_CALLS = {"get", "pop", "setdefault"}


def status_values(path: Path) -> list[tuple[int, str]]:
    """(line, word) of every status word the file uses as a status value: compared, returned,
    passed to a call (`finish("void")`, `write_status(wh, row, "running")`, `status="queued"`),
    stored under the key "status" or assigned to a name or attribute `status`. Column names and
    keys that happen to be status words (`{"measured": True}`, `ev["void"]`) are not values."""

    def word(n) -> bool:
        return isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in WORDS

    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        candidates = []
        if isinstance(node, ast.Compare):
            candidates = [node.left, *node.comparators]
        elif isinstance(node, ast.Return) and node.value is not None:
            candidates = [node.value]
        elif isinstance(node, ast.Call):
            if (getattr(node.func, "attr", None) or getattr(node.func, "id", None)) not in KEY_CALLS:
                candidates = [*node.args, *(k.value for k in node.keywords)]
        elif isinstance(node, ast.Dict):
            candidates = [
                v for k, v in zip(node.keys, node.values) if isinstance(k, ast.Constant) and k.value == "status"
            ]
        elif isinstance(node, ast.Assign):
            if any((getattr(t, "id", None) or getattr(t, "attr", None)) == "status" for t in node.targets):
                candidates = [node.value]
        found += [(c.lineno, c.value) for c in candidates if word(c)]
    return found


def test_no_status_literal_value_outside_rules():
    """Not only the sets: a status compared, written or returned is named by its member."""
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line} {word!r}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).parts[0] != "rules"
        for line, word in status_values(path)
    ]
    assert found == [], "name the members of rules/status.py instead:\n" + "\n".join(found)


def test_the_check_sees_a_status_value(tmp_path):
    p = tmp_path / "m.py"
    p.write_text(
        'if row["status"] == "running": pass\n'
        'self.finish("void", void_reason="x")\n'
        'write(status="queued")\n'
        'row = {"status": "measured"}\n'
        'def f():\n    return "failed"\n'
        'o.status = "refused"\n'
        'flag = row.get("void") or {"measured": True}["measured"]\n'
    )
    assert sorted(line for line, _ in status_values(p)) == [1, 2, 3, 4, 6, 7]


def test_no_status_literal_set_outside_rules():
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line} {words}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).parts[0] != "rules"
        for line, words in status_sets(path)
    ]
    assert found == [], "name the sets of rules/status.py instead:\n" + "\n".join(found)


def test_the_check_sees_a_literal_set(tmp_path):
    """The grep above is not blind: it finds the forms a status set takes in code."""
    p = tmp_path / "m.py"
    p.write_text('A = ("measured", "failed")\nif s in {"queued", "running"}: pass\nB = ["fetching", "x", "refused"]\n')
    assert sorted(line for line, _ in status_sets(p)) == [1, 2, 3]


def test_the_vocabulary():
    assert [m.value for m in S.Status] == ["queued", "running", "measured", "void", "failed"]
    assert [m.value for m in S.IntakeState] == ["fetching", "accepted", "refused"]
    assert set(S.FINAL) == {"measured", "void", "failed"} and set(S.RANKED) == {"measured", "failed"}
    assert set(S.UNFINISHED) == {"queued", "running"}
    assert set(S.SUBMISSION_FINAL) == {"measured", "void", "failed", "refused"}
    assert S.check("void") == "void" and type(S.check(S.VOID)) is str


def test_a_member_is_the_string_it_stands_for(tmp_path):
    """Compared, hashed, formatted, sent as JSON and stored in Parquet, DuckDB and SQLite, a member
    is its plain string, so replacing a literal by its member changes no stored or sent value."""
    values = [m.value for m in MEMBERS]
    assert all(m == m.value and hash(m) == hash(m.value) and f"{m}" == str(m) == m.value for m in MEMBERS)
    assert {m.value: 1 for m in MEMBERS}.get(S.MEASURED) == 1 and "void" in S.FINAL
    assert json.loads(json.dumps({"status": S.QUEUED, "all": MEMBERS})) == {"status": "queued", "all": values}
    pq.write_table(pa.table({"status": MEMBERS}), tmp_path / "t.parquet")
    back = pq.read_table(tmp_path / "t.parquet").column("status").to_pylist()
    assert back == values and all(type(v) is str for v in back)
    got = duckdb.execute("SELECT ?::VARCHAR, ? = 'measured'", [S.MEASURED, S.MEASURED]).fetchone()
    assert got == ("measured", True)
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE t (s TEXT)")
    con.executemany("INSERT INTO t VALUES (?)", [(m,) for m in MEMBERS])
    assert con.execute("SELECT s, typeof(s) FROM t").fetchall() == [(v, "text") for v in values]
    assert con.execute("SELECT count(*) FROM t WHERE s = ?", (S.FETCHING,)).fetchone() == (1,)
    frame = pd.DataFrame({"status": values})
    assert frame["status"].isin(S.FINAL).tolist() == [v in ("measured", "void", "failed") for v in values]
    assert (frame["status"] == S.VOID).sum() == 1
