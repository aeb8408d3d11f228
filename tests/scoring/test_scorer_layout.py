"""The scorer's layout rules (issue 19): every statement it runs is a file of scoring/sql/, every
file there is run, and one bundle (rows.ScoringRows) carries every frame the SQL returns."""

from __future__ import annotations

import ast
import dataclasses
import re
from importlib import resources
from pathlib import Path

import pandas as pd
import pytest
from synthetic import write_synthetic_evaluation

import speculator_arena.scoring as scoring_package
from speculator_arena.protocol import load_protocol
from speculator_arena.scoring.assemble import assemble
from speculator_arena.scoring.limits import protocol_limits
from speculator_arena.scoring.rows import ScoringRows, read_rows

SCORING = Path(scoring_package.__file__).resolve().parent
# A statement as this codebase writes one: an upper-case keyword first, then a clause (FROM, AS,
# INTO, VALUES, an assignment or a call). A fragment such as the view prefix connection.py
# rewrites in the warehouse's own files is not a statement.
SQL_STATEMENT = re.compile(
    r"^(SELECT|WITH|CREATE|INSERT|UPDATE|DELETE|SET|DROP|ALTER|COPY|PRAGMA)\s.*(\b(FROM|AS|INTO|VALUES)\b|=|\()", re.S
)


def _python_files():
    return sorted(SCORING.rglob("*.py"))


def _strings(path: Path):
    """(line, text) of every string literal; an f-string as its literal parts joined by "{}"."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value
        elif isinstance(node, ast.JoinedStr):
            yield node.lineno, "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)


def test_no_sql_statement_is_written_in_the_scorers_python():
    found = [
        f"{p.relative_to(SCORING)}:{line}: {text[:60]!r}"
        for p in _python_files()
        for line, text in _strings(p)
        if SQL_STATEMENT.match(text)
    ]
    assert found == []


def test_every_sql_file_of_the_scorer_is_run_by_its_code():
    files = sorted(
        f.name for f in (resources.files("speculator_arena.scoring") / "sql").iterdir() if f.name.endswith(".sql")
    )
    named = {text for p in _python_files() for _, text in _strings(p) if text.endswith(".sql")}
    assert len(files) > 10
    assert [f for f in files if f not in named] == []


def test_the_bundle_holds_every_frame_and_assemble_reads_only_it(tmp_path):
    from speculator_arena.warehouse import Warehouse

    wh = Warehouse(tmp_path / "home")
    write_synthetic_evaluation(wh, "a", seed=1)
    write_synthetic_evaluation(wh, "b", seed=2, attack="length")
    proto = load_protocol()
    limits = protocol_limits(proto)
    rows = read_rows(wh, proto, limits)
    fields = [f.name for f in dataclasses.fields(ScoringRows)]
    assert all(isinstance(getattr(rows, f), pd.DataFrame) for f in fields)
    assert sorted(rows.evaluations["evaluation_id"]) == ["a", "b"]
    assert set(rows.busy["evaluation_id"]) == set(rows.passes["evaluation_id"]) == {"a", "b"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        rows.greedy = rows.scored
    # the bundle alone decides the outcome: the same rows give the same frames, and a rows bundle
    # whose length rows are emptied leaves exactly the length gate unmeasured
    s = assemble(proto, "digest", limits, rows)
    again = assemble(proto, "digest", limits, rows)
    pd.testing.assert_frame_equal(s.evaluations, again.evaluations)
    e = s.evaluations.set_index("evaluation_id")
    assert e.at["b", "failed_gates"] == "length" and e.at["a", "specscore"] > 1
    no_length = dataclasses.replace(rows, length=rows.length.iloc[:0])
    g = assemble(proto, "digest", limits, no_length).gates
    length = g[g["gate"] == "length"].set_index("evaluation_id")["verdict"]
    assert (length == "not measured").all()
    others = g[g["gate"] != "length"].reset_index(drop=True)
    pd.testing.assert_frame_equal(others, s.gates[s.gates["gate"] != "length"].reset_index(drop=True))
